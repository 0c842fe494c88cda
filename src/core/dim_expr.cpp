#include <kiln/dim_expr.hpp>

#include <cctype>
#include <limits>

namespace kiln {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Exporters write INT64_MAX for "to the end" in Slice: any int64 is a constant.
constexpr std::int64_t max_magnitude = std::numeric_limits<std::int64_t>::max();

}  // namespace

dim_expr dim_expr::constant(std::int64_t c) {
    dim_expr e;
    e.constant_ = c;
    return e;
}

dim_expr dim_expr::symbol(const std::string& name) {
    dim_expr e;
    e.terms_[name] = 1;
    return e;
}

bool dim_expr::is_symbol() const { return constant_ == 0 && terms_.size() == 1 && terms_.begin()->second == 1; }

std::optional<dim_expr> dim_expr::parse(std::string_view s) {
    std::size_t i = 0;
    auto skip = [&] {
        while (i < s.size() && s[i] == ' ') ++i;
    };
    auto number = [&]() -> std::optional<std::int64_t> {
        if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) return std::nullopt;
        std::int64_t v = 0;
        while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
            if (v > (max_magnitude - (s[i] - '0')) / 10) return std::nullopt;
            v = v * 10 + (s[i++] - '0');
        }
        return v;
    };
    dim_expr out;
    bool first = true;
    skip();
    if (i == s.size()) return std::nullopt;
    while (true) {
        skip();
        std::int64_t sign = 1;
        if (!first || (i < s.size() && s[i] == '-')) {
            if (i < s.size() && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
            else if (!first) return std::nullopt;
            skip();
        }
        first = false;
        // term: N | name | N*name | N name? (no: keep it strict) | name*N
        std::int64_t coef = 1;
        std::string name;
        if (auto n = number()) {
            coef = *n;
            skip();
            if (i < s.size() && s[i] == '*') {
                ++i;
                skip();
                if (i >= s.size() || !ident_start(s[i])) return std::nullopt;
            } else {
                out.constant_ += sign * coef;
                skip();
                if (i == s.size()) break;
                continue;
            }
        }
        if (i >= s.size() || !ident_start(s[i])) return std::nullopt;
        std::size_t b = i;
        while (i < s.size() && ident_char(s[i])) ++i;
        name.assign(s.substr(b, i - b));
        skip();
        if (i < s.size() && s[i] == '*') {
            ++i;
            skip();
            auto n = number();
            if (!n) return std::nullopt;
            coef *= *n;
            skip();
        }
        auto& c = out.terms_[name];
        c += sign * coef;
        if (c == 0) out.terms_.erase(name);
        if (i == s.size()) break;
    }
    return out;
}

dim_expr dim_expr::from_dim_param(std::string_view text) {
    if (auto e = parse(text)) return *e;
    std::string name;
    for (char c : text) name += ident_char(c) ? c : '_';
    if (name.empty() || !ident_start(name[0])) name = "_" + name;
    return symbol(name);
}

std::string dim_expr::to_string() const {
    std::string out;
    for (auto& [name, c] : terms_) {
        std::int64_t m = c < 0 ? -c : c;
        if (out.empty()) out += c < 0 ? "-" : "";
        else out += c < 0 ? " - " : " + ";
        if (m != 1) out += std::to_string(m) + "*";
        out += name;
    }
    if (constant_ != 0 || out.empty()) {
        std::int64_t m = constant_ < 0 ? -constant_ : constant_;
        if (out.empty()) out = (constant_ < 0 ? "-" : "") + std::to_string(m);
        else out += (constant_ < 0 ? " - " : " + ") + std::to_string(m);
    }
    return out;
}

std::optional<std::int64_t> dim_expr::evaluate(const std::map<std::string, std::int64_t>& values) const {
    std::int64_t v = constant_;
    for (auto& [name, c] : terms_) {
        auto it = values.find(name);
        if (it == values.end()) return std::nullopt;
        std::int64_t t = 0;
        if (__builtin_mul_overflow(c, it->second, &t) || __builtin_add_overflow(v, t, &v)) return std::nullopt;
    }
    return v;
}

dim_expr& dim_expr::operator+=(const dim_expr& o) {
    constant_ += o.constant_;
    for (auto& [name, c] : o.terms_) {
        auto& mine = terms_[name];
        mine += c;
        if (mine == 0) terms_.erase(name);
    }
    return *this;
}

dim_expr& dim_expr::operator*=(std::int64_t k) {
    if (k == 0) {
        terms_.clear();
        constant_ = 0;
        return *this;
    }
    constant_ *= k;
    for (auto& [name, c] : terms_) c *= k;
    return *this;
}

}  // namespace kiln
