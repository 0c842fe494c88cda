#include "core/shape_parser.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>

#include <cctype>
#include <limits>
#include <string>
#include <vector>

namespace kiln::detail {

namespace {

class shape_parser {
public:
    shape_parser(std::string_view s, bool adjacent_strides) : s_(s), adjacent_strides_(adjacent_strides) {}

    shape parse_all() {
        auto r = parse();
        skip();
        if (pos_ != s_.size()) fail("trailing characters");
        return r;
    }

    shape parse_prefix(std::size_t& used) {
        auto r = parse();
        used = pos_;
        return r;
    }

private:
    [[noreturn]] void fail(const std::string& why) {
        throw_error(error_code::parse, "malformed shape '" + std::string(s_) + "' at " + std::to_string(pos_) + ": " + why);
    }
    void skip() {
        while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
    }
    bool eat(char c) {
        skip();
        if (pos_ < s_.size() && s_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!eat(c)) fail(std::string("expected '") + c + "'");
    }
    std::string word() {
        skip();
        auto b = pos_;
        while (pos_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) ++pos_;
        return std::string(s_.substr(b, pos_ - b));
    }
    // Sizes stay below 2^60 (so products of a few cannot wrap); `any_size_t` allows the
    // whole range, for optimals, which print whatever they hold.
    std::size_t number(bool any_size_t = false) {
        skip();
        if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) fail("expected a number");
        const std::size_t limit = any_size_t ? std::numeric_limits<std::size_t>::max() : std::size_t{1} << 60;
        std::size_t v = 0;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
            auto digit = static_cast<std::size_t>(s_[pos_++] - '0');
            if (v > (limit - digit) / 10) fail("number too large");
            v = v * 10 + digit;
        }
        return v;
    }
    std::vector<shape> list() {
        std::vector<shape> out;
        expect('(');
        if (eat(')')) return out;
        do {
            if (++depth_ > 64) fail("nested too deeply");
            out.push_back(parse());
            --depth_;
        } while (eat(','));
        expect(')');
        return out;
    }
    shape parse() {
        auto w = word();
        if (w == "tuple") return shape::tuple(list());
        if (w == "sequence" || w == "optional") {
            auto l = list();
            if (l.size() != 1) fail(w + " takes one element shape");
            return w == "sequence" ? shape::sequence(l[0]) : shape::optional(l[0]);
        }
        type t = type_from_name(w);
        expect('[');
        std::vector<dynamic_dimension> dims;
        bool dyn = false;
        if (!eat(']')) {
            do {
                if (eat('{')) {
                    dynamic_dimension d;
                    skip();
                    if (pos_ < s_.size() && !std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
                        // "{past + sequence=0:?}": the symbol runs up to '='.
                        auto end = s_.find('=', pos_);
                        if (end == std::string_view::npos) fail("expected '=' after a dimension's symbol");
                        auto e = dim_expr::parse(s_.substr(pos_, end - pos_));
                        if (!e) fail("bad dimension symbol '" + std::string(s_.substr(pos_, end - pos_)) + "'");
                        d.symbol = e->to_string();
                        pos_ = end + 1;
                    }
                    d.min = number();
                    expect(':');
                    if (eat('?')) d.max = dynamic_dimension::unbounded;
                    else d.max = number();
                    if (eat(':')) {
                        expect('[');
                        if (!eat(']')) {
                            do d.optimals.insert(number(true));
                            while (eat(','));
                            expect(']');
                        }
                    }
                    expect('}');
                    dims.push_back(d);
                    dyn = true;
                } else {
                    auto n = number();
                    dims.push_back({n, n, {}});
                }
                if (dims.size() > 64) fail("too many dimensions");
            } while (eat(','));
            expect(']');
        }
        if (dyn) return shape::make_dynamic(t, dims);
        std::vector<std::size_t> lens;
        for (auto& d : dims) lens.push_back(d.min);
        // "<batch, 4, ?>": values of shape arithmetic (shape::with_values).
        std::vector<std::string> values;
        if (!adjacent_strides_) skip();
        if (pos_ < s_.size() && s_[pos_] == '<') {
            ++pos_;
            auto end = s_.find('>', pos_);
            if (end == std::string_view::npos) fail("missing '>' after values");
            auto text = s_.substr(pos_, end - pos_);
            std::size_t b = 0;
            while (b <= text.size()) {
                auto c = text.find(',', b);
                if (c == std::string_view::npos) c = text.size();
                auto item = text.substr(b, c - b);
                while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
                while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
                if (item == "?") {
                    values.emplace_back();
                } else {
                    auto e = dim_expr::parse(item);
                    if (!e) fail("bad value '" + std::string(item) + "'");
                    values.push_back(e->to_string());
                }
                b = c + 1;
            }
            pos_ = end + 1;
        }
        auto with_values = [&](shape r) {
            if (values.empty()) return r;
            try {
                return r.with_values(values);
            } catch (const error& e) {
                fail(e.message());
            }
        };
        if (!adjacent_strides_) skip();
        if (pos_ < s_.size() && s_[pos_] == '{') {
            ++pos_;
            std::vector<std::size_t> strides;
            if (!eat('}')) {
                do strides.push_back(number());
                while (eat(','));
                expect('}');
            }
            return with_values(shape(t, lens, strides));
        }
        return with_values(shape(t, lens));
    }

    std::string_view s_;
    bool adjacent_strides_;
    std::size_t pos_ = 0;
    int depth_ = 0;
};

}  // namespace

shape parse_shape(std::string_view text) { return shape_parser(text, false).parse_all(); }

shape parse_shape_prefix(std::string_view text, std::size_t& used) {
    return shape_parser(text, true).parse_prefix(used);
}

}  // namespace kiln::detail
