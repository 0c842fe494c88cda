// Element types of tensors, their C++ storage types, and visitors over them.
#pragma once
#include <kiln/float_types.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace kiln {

// Order is part of the .kiln format: append only.
enum class type : std::uint8_t {
    bool_,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    float16,
    bfloat16,
    float32,
    float64,
    float8e4m3fn,
    float8e5m2,
    float8e4m3fnuz,
    float8e5m2fnuz,
    float8e8m0,
    float4e2m1,
    int4,
    uint4,
    int2,
    uint2,
    string,
};
inline constexpr int type_count = static_cast<int>(type::string) + 1;

template <type T>
struct storage_of;
#define KILN_STORAGE(E, C) \
    template <>            \
    struct storage_of<type::E> { using type = C; }
KILN_STORAGE(bool_, bool);
KILN_STORAGE(int8, std::int8_t);
KILN_STORAGE(int16, std::int16_t);
KILN_STORAGE(int32, std::int32_t);
KILN_STORAGE(int64, std::int64_t);
KILN_STORAGE(uint8, std::uint8_t);
KILN_STORAGE(uint16, std::uint16_t);
KILN_STORAGE(uint32, std::uint32_t);
KILN_STORAGE(uint64, std::uint64_t);
KILN_STORAGE(float16, half);
KILN_STORAGE(bfloat16, kiln::bfloat16);
KILN_STORAGE(float32, float);
KILN_STORAGE(float64, double);
KILN_STORAGE(float8e4m3fn, fp8e4m3fn);
KILN_STORAGE(float8e5m2, fp8e5m2);
KILN_STORAGE(float8e4m3fnuz, fp8e4m3fnuz);
KILN_STORAGE(float8e5m2fnuz, fp8e5m2fnuz);
KILN_STORAGE(float8e8m0, fp8e8m0);
KILN_STORAGE(float4e2m1, fp4e2m1);
KILN_STORAGE(int4, kiln::int4);
KILN_STORAGE(uint4, kiln::uint4);
KILN_STORAGE(int2, kiln::int2);
KILN_STORAGE(uint2, kiln::uint2);
KILN_STORAGE(string, std::string);
#undef KILN_STORAGE

template <type T>
using storage_t = typename storage_of<T>::type;

// The C++ type -> element type direction.
template <class C>
constexpr type type_of();

namespace detail {
template <class C, int I = 0>
constexpr type find_type() {
    if constexpr (I >= type_count) {
        static_assert(I < type_count, "not a kiln element type");
        return type::bool_;
    } else if constexpr (std::is_same_v<storage_t<static_cast<type>(I)>, C>) {
        return static_cast<type>(I);
    } else {
        return find_type<C, I + 1>();
    }
}
}  // namespace detail

template <class C>
constexpr type type_of() { return detail::find_type<C>(); }

// Bytes one element occupies in memory (sub-byte types are unpacked: 1).
std::size_t type_size(type t);
std::string_view type_name(type t);   // "float32", "int64", ...
type type_from_name(std::string_view name);  // throws kiln error on unknown

constexpr bool is_float(type t) {
    return t == type::float16 || t == type::bfloat16 || t == type::float32 || t == type::float64 ||
           t == type::float8e4m3fn || t == type::float8e5m2 || t == type::float8e4m3fnuz ||
           t == type::float8e5m2fnuz || t == type::float8e8m0 || t == type::float4e2m1;
}
constexpr bool is_fp8(type t) {
    return t == type::float8e4m3fn || t == type::float8e5m2 || t == type::float8e4m3fnuz ||
           t == type::float8e5m2fnuz || t == type::float8e8m0;
}
constexpr bool is_signed_int(type t) {
    return t == type::int8 || t == type::int16 || t == type::int32 || t == type::int64 ||
           t == type::int4 || t == type::int2;
}
constexpr bool is_unsigned_int(type t) {
    return t == type::uint8 || t == type::uint16 || t == type::uint32 || t == type::uint64 ||
           t == type::uint4 || t == type::uint2;
}
constexpr bool is_integer(type t) { return is_signed_int(t) || is_unsigned_int(t); }

// The arithmetic type a reference kernel computes in for storage type C:
// low-precision floats compute in float, sub-byte ints in int, the rest as themselves.
template <class C>
struct compute_type { using type = C; };
template <> struct compute_type<half> { using type = float; };
template <> struct compute_type<bfloat16> { using type = float; };
template <> struct compute_type<fp8e4m3fn> { using type = float; };
template <> struct compute_type<fp8e5m2> { using type = float; };
template <> struct compute_type<fp8e4m3fnuz> { using type = float; };
template <> struct compute_type<fp8e5m2fnuz> { using type = float; };
template <> struct compute_type<fp8e8m0> { using type = float; };
template <> struct compute_type<fp4e2m1> { using type = float; };
template <> struct compute_type<int4> { using type = int; };
template <> struct compute_type<uint4> { using type = int; };
template <> struct compute_type<int2> { using type = int; };
template <> struct compute_type<uint2> { using type = int; };
template <class C>
using compute_t = typename compute_type<C>::type;

// Converts between any two non-string storage types with ONNX Cast semantics: round to
// nearest even (a single rounding), fp8 saturation and e8m0 round-up by default (call the
// constructors / to_fp8e8m0 for the other attribute values), float->int truncates toward
// zero except to int4/uint4/int2/uint2, which round to nearest even and keep the low bits.
// Out-of-range float->int (undefined in ONNX) is defined here: NaN -> 0, else clamps to the
// target range (wider ints) or wraps (sub-byte ints; inf -> 0). To bool: x != 0 (NaN -> true).
template <class To, class From>
To convert(From x);

// Calls f(std::type_identity<C>{}) with the storage type C of `t`.
template <class F>
decltype(auto) visit_type(type t, F&& f);
// Same, but only numeric types; string throws a type error naming `what`.
template <class F>
decltype(auto) visit_numeric(type t, F&& f, std::string_view what = "operation");

[[noreturn]] void throw_unsupported_type(type t, std::string_view what);

}  // namespace kiln

#include <kiln/detail/types_impl.hpp>
