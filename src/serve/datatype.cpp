#include "serve/datatype.hpp"

#include <array>
#include <utility>

namespace kiln::serve {

namespace {
constexpr std::array<std::pair<std::string_view, type>, 13> names = {{
    {"BOOL", type::bool_},
    {"UINT8", type::uint8},
    {"UINT16", type::uint16},
    {"UINT32", type::uint32},
    {"UINT64", type::uint64},
    {"INT8", type::int8},
    {"INT16", type::int16},
    {"INT32", type::int32},
    {"INT64", type::int64},
    {"FP16", type::float16},
    {"BF16", type::bfloat16},
    {"FP32", type::float32},
    {"FP64", type::float64},
}};
}  // namespace

std::optional<type> type_of_datatype(std::string_view datatype) {
    for (auto& [n, t] : names)
        if (n == datatype) return t;
    return std::nullopt;
}

std::string datatype_of(type t) {
    for (auto& [n, k] : names)
        if (k == t) return std::string(n);
    return "";
}

}  // namespace kiln::serve
