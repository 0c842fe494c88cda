// Shapes and literals as values. A shape is stored as its printed text form
// (e.g. "float32[2, 3]{1, 2}"), which keeps op attributes readable in IR dumps and
// .kiln files alike; the parser below reads it back and rejects anything malformed.
#include <kiln/errors.hpp>
#include <kiln/dim_expr.hpp>
#include <kiln/reflect.hpp>

#include <cctype>

namespace kiln {

namespace {

class shape_parser {
public:
    explicit shape_parser(std::string_view s) : s_(s) {}

    shape parse_all() {
        auto r = parse();
        skip();
        if (pos_ != s_.size()) fail("trailing characters");
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
    std::size_t number() {
        skip();
        if (pos_ >= s_.size() || !std::isdigit(static_cast<unsigned char>(s_[pos_]))) fail("expected a number");
        std::size_t v = 0;
        while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
            if (v > (std::size_t{1} << 60)) fail("number too large");
            v = v * 10 + static_cast<std::size_t>(s_[pos_++] - '0');
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
                            do d.optimals.insert(number());
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
        skip();
        // "<batch, 4, ?>": values of shape arithmetic (shape::with_values).
        std::vector<std::string> values;
        if (eat('<')) {
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
            skip();
        }
        auto with_values = [&](shape r) {
            if (values.empty()) return r;
            try {
                return r.with_values(values);
            } catch (const error& e) {
                fail(e.message());
            }
        };
        if (eat('{')) {
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
    std::size_t pos_ = 0;
    int depth_ = 0;
};

}  // namespace

namespace {
// The printed form, except that strides are written whenever they are not exactly
// row-major: printing omits them when only size-1 dimensions differ, but shape
// equality compares them, so the value must keep them for a shape to read back equal.
std::string exact_text(const shape& s) {
    auto list = [](const std::vector<shape>& subs) {
        std::string out;
        for (auto& e : subs) out += (out.empty() ? "" : ", ") + exact_text(e);
        return out;
    };
    if (s.is_tuple()) return "tuple(" + list(s.sub_shapes()) + ")";
    if (s.is_sequence()) return "sequence(" + list(s.sub_shapes()) + ")";
    if (s.is_optional()) return "optional(" + list(s.sub_shapes()) + ")";
    if (s.dynamic() || s.lens().empty() || s.strides() == shape::standard_strides(s.lens()) || !s.standard())
        return s.to_string();
    std::string out = s.as_standard().to_string() + "{";
    for (std::size_t i = 0; i < s.strides().size(); ++i) out += (i ? ", " : "") + std::to_string(s.strides()[i]);
    return out + "}";
}
}  // namespace

value shape_to_value(const shape& s) { return value(exact_text(s)); }

shape shape_from_value(const value& v) { return shape_parser(v.get_string()).parse_all(); }

value literal_to_value(const literal& l) {
    value v = value::make_object();
    const auto& s = l.get_shape();
    v["shape"] = shape_to_value(s);
    if (l.empty()) return v;
    if (s.get_type() == type::string) {
        value::array strings;
        for (auto& str : l.to_vector<std::string>()) strings.emplace_back(str);
        v["strings"] = value(std::move(strings));
    } else {
        v["data"] = value(value::binary{std::string(l.data(), s.bytes())});
    }
    return v;
}

literal literal_from_value(const value& v) {
    shape s = shape_from_value(v.at("shape"));
    if (!s.is_tensor() || s.dynamic()) throw_error(error_code::parse, "a literal needs a static tensor shape, got " + s.to_string());
    if (s.get_type() == type::string) {
        std::vector<std::string> strings;
        for (auto& x : v.at("strings").get_array()) strings.push_back(x.get_string());
        return literal(s.as_standard(), strings);
    }
    if (!v.contains("data")) {
        if (s.elements() == 0) return literal(s, std::vector<float>{});
        throw_error(error_code::parse, "literal of shape " + s.to_string() + " has no data");
    }
    const auto& bytes = v.at("data").get_binary().bytes;
    if (bytes.size() != s.bytes())
        throw_error(error_code::parse, "literal of shape " + s.to_string() + " needs " + std::to_string(s.bytes()) +
                                           " bytes, the data has " + std::to_string(bytes.size()));
    return literal(s, bytes.data());
}

}  // namespace kiln
