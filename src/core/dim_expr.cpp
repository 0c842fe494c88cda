#include <kiln/dim_expr.hpp>

#include <algorithm>
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

dim_expr dim_expr::product(std::vector<std::string> names) {
    std::sort(names.begin(), names.end());
    std::string term;
    for (auto& n : names) term += (term.empty() ? "" : "*") + n;
    dim_expr e;
    e.terms_[term] = 1;
    return e;
}

std::vector<std::string> dim_expr::factors(const std::string& term) {
    std::vector<std::string> out;
    std::size_t b = 0;
    while (true) {
        auto e = term.find('*', b);
        out.push_back(term.substr(b, e == std::string::npos ? std::string::npos : e - b));
        if (e == std::string::npos) return out;
        b = e + 1;
    }
}

std::set<std::string> dim_expr::names() const {
    std::set<std::string> out;
    for (auto& [term, c] : terms_)
        for (auto& n : factors(term)) out.insert(n);
    return out;
}

bool dim_expr::is_symbol() const {
    return constant_ == 0 && terms_.size() == 1 && terms_.begin()->second == 1 &&
           terms_.begin()->first.find('*') == std::string::npos;
}

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
        // name (* name)* [* N]
        std::vector<std::string> factors;
        while (true) {
            if (i >= s.size() || !ident_start(s[i])) return std::nullopt;
            std::size_t b = i;
            while (i < s.size() && ident_char(s[i])) ++i;
            factors.emplace_back(s.substr(b, i - b));
            skip();
            if (i >= s.size() || s[i] != '*') break;
            ++i;
            skip();
            if (auto n = number()) {
                coef *= *n;
                skip();
                break;
            }
        }
        std::sort(factors.begin(), factors.end());
        for (auto& f : factors) name += (name.empty() ? "" : "*") + f;
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
    for (auto& [term, c] : terms_) {
        std::int64_t t = c;
        auto times = [&](const std::string& name) {
            auto it = values.find(name);
            return it != values.end() && !__builtin_mul_overflow(t, it->second, &t);
        };
        if (term.find('*') == std::string::npos) {  // a name (no allocation: eval checks inputs with this)
            if (!times(term)) return std::nullopt;
        } else {
            for (auto& name : factors(term))
                if (!times(name)) return std::nullopt;
        }
        if (__builtin_add_overflow(v, t, &v)) return std::nullopt;
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
