// Shapes and literals as values. A shape is stored as its printed text form
// (e.g. "float32[2, 3]{1, 2}"), which keeps op attributes readable in IR dumps and
// .kiln files alike; shape_parser.cpp reads it back and rejects anything malformed.
#include "core/shape_parser.hpp"

#include <kiln/errors.hpp>
#include <kiln/reflect.hpp>

namespace kiln {

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

shape shape_from_value(const value& v) { return detail::parse_shape(v.get_string()); }

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
