// Compile-time lists of element storage types, and a visitor restricted to one list.
//
// visit_type() instantiates a kernel for all 24 element types; an op that accepts only
// a few (Sin: the four float types) would pay compile time and code size for the rest.
// visit_list() instantiates only the listed types, and list_contains() is the matching
// run-time check compute_shape uses to reject the others with a clear error.
#pragma once
#include <kiln/types.hpp>

#include <string>
#include <type_traits>

namespace kiln::op {

template <class... Ts>
struct type_list {};

template <class... Ls>
struct concat_lists;
template <class... A>
struct concat_lists<type_list<A...>> {
    using type = type_list<A...>;
};
template <class... A, class... B, class... Rest>
struct concat_lists<type_list<A...>, type_list<B...>, Rest...> : concat_lists<type_list<A..., B...>, Rest...> {};
template <class... Ls>
using concat_t = typename concat_lists<Ls...>::type;

template <class... Ts>
constexpr bool list_contains(type_list<Ts...>, [[maybe_unused]] type t) {
    return ((type_of<Ts>() == t) || ...);
}

// Calls f(std::type_identity<C>{}) for the storage type C of `t` when C is in the list;
// returns false (calling nothing) when it is not.
template <class... Ts, class F>
bool visit_list(type_list<Ts...>, [[maybe_unused]] type t, [[maybe_unused]] F&& f) {
    return ((type_of<Ts>() == t ? (f(std::type_identity<Ts>{}), true) : false) || ...);
}

// "float16, bfloat16, float32, float64" for error messages.
template <class... Ts>
std::string list_names(type_list<Ts...>) {
    std::string out;
    ((out += (out.empty() ? "" : ", ") + std::string(type_name(type_of<Ts>()))), ...);
    return out;
}

using float_types = type_list<half, bfloat16, float, double>;
using fp8_types = type_list<fp8e4m3fn, fp8e4m3fnuz, fp8e5m2, fp8e5m2fnuz>;
using signed_int_types = type_list<std::int8_t, std::int16_t, std::int32_t, std::int64_t>;
using unsigned_int_types = type_list<std::uint8_t, std::uint16_t, std::uint32_t, std::uint64_t>;
using int_types = concat_t<signed_int_types, unsigned_int_types>;
// What ONNX calls "all numeric types" for most math ops.
using numeric_types = concat_t<float_types, int_types>;
using signed_numeric_types = concat_t<float_types, signed_int_types>;
using sub_byte_types = type_list<fp4e2m1, kiln::int4, kiln::uint4, kiln::int2, kiln::uint2>;
// Every type but string.
using non_string_types =
    concat_t<type_list<bool>, numeric_types, fp8_types, type_list<fp8e8m0>, sub_byte_types>;
using all_types = concat_t<non_string_types, type_list<std::string>>;

}  // namespace kiln::op
