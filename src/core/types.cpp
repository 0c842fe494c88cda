#include <kiln/errors.hpp>
#include <kiln/types.hpp>

#include <array>

namespace kiln {

namespace {
constexpr std::array<std::string_view, type_count> names = {
    "bool",     "int8",     "int16",        "int32",      "int64",          "uint8",
    "uint16",   "uint32",   "uint64",       "float16",    "bfloat16",       "float32",
    "float64",  "float8e4m3fn", "float8e5m2", "float8e4m3fnuz", "float8e5m2fnuz", "float8e8m0",
    "float4e2m1", "int4",   "uint4",        "int2",       "uint2",          "string",
};
}  // namespace

std::size_t type_size(type t) {
    return visit_type(t, [](auto tag) -> std::size_t { return sizeof(typename decltype(tag)::type); });
}

std::string_view type_name(type t) {
    auto i = static_cast<std::size_t>(t);
    return i < names.size() ? names[i] : std::string_view("invalid");
}

type type_from_name(std::string_view name) {
    for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == name) return static_cast<type>(i);
    throw_error(error_code::type, "unknown element type '" + std::string(name) + "'");
}

void throw_unsupported_type(type t, std::string_view what) {
    throw_error(error_code::type,
                std::string(what) + " does not support element type " + std::string(type_name(t)));
}

}  // namespace kiln
