// Template bodies for types.hpp.
#pragma once
#include <bit>
#include <cmath>
#include <limits>

namespace kiln {

namespace detail {
template <class C>
constexpr bool is_small_float_v =
    std::is_same_v<C, half> || std::is_same_v<C, bfloat16> || std::is_same_v<C, fp8e4m3fn> ||
    std::is_same_v<C, fp8e5m2> || std::is_same_v<C, fp8e4m3fnuz> ||
    std::is_same_v<C, fp8e5m2fnuz> || std::is_same_v<C, fp8e8m0> || std::is_same_v<C, fp4e2m1>;
template <class C>
constexpr bool is_small_int_v = std::is_same_v<C, int4> || std::is_same_v<C, uint4> ||
                                std::is_same_v<C, int2> || std::is_same_v<C, uint2>;

// Float -> integer as C++ static_cast would, but defined for NaN/inf/out-of-range
// (those are undefined behaviour in C++; ONNX leaves them implementation-defined).
template <class I, class F>
I float_to_int(F f) {
    if (std::isnan(f)) return I(0);
    if constexpr (std::is_same_v<I, bool>) {
        return f != F(0);
    } else {
        const auto t = std::trunc(f);
        if (t <= static_cast<F>(std::numeric_limits<I>::lowest())) return std::numeric_limits<I>::lowest();
        if (t >= static_cast<F>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
        return static_cast<I>(t);
    }
}

// ONNX Cast to the 4-bit and 2-bit integers rounds to the nearest integer, ties to
// even, then keeps the low bits (onnx docs/technical int4.md, int2.md); wider integer
// types truncate instead. Returns a value whose low bits are the result (|v| < 2^bits);
// NaN and infinities have no integer value and give 0.
template <class F>
long long round_even_low_bits(F f, int bits) {
    if (!std::isfinite(f)) return 0;
    F t = std::trunc(f);
    const F frac = std::fabs(f - t);  // exact
    if (frac > F(0.5) || (frac == F(0.5) && std::fmod(t, F(2)) != F(0))) t += f < F(0) ? F(-1) : F(1);
    return static_cast<long long>(std::fmod(t, static_cast<F>(1ll << bits)));  // exact
}

// Integers reach the small float formats through double. Up to 2^53 that is exact;
// wider 64-bit values are rounded to odd first (truncate, then set the last kept bit if
// anything was dropped), which keeps the later rounding to <= 24 bits correct, where
// plain int64 -> double would round twice.
template <class I>
double int_to_double_round_odd(I x) {
    if constexpr (sizeof(I) < 8) {
        return static_cast<double>(x);
    } else {
        using U = std::make_unsigned_t<I>;
        const bool negative = x < I(0);
        const U m = negative ? U(0) - static_cast<U>(x) : static_cast<U>(x);
        if (m < (U(1) << 53)) return static_cast<double>(x);
        const int drop = 64 - std::countl_zero(m) - 53;
        U kept = m >> drop;
        if ((m & ((U(1) << drop) - 1)) != 0) kept |= 1;
        const double d = std::ldexp(static_cast<double>(kept), drop);
        return negative ? -d : d;
    }
}
}  // namespace detail

template <class To, class From>
To convert(From x) {
    if constexpr (std::is_same_v<To, From>) {
        return x;
    } else if constexpr (std::is_same_v<From, std::string> || std::is_same_v<To, std::string>) {
        static_assert(!std::is_same_v<To, To>, "strings are converted by Cast, not convert()");
    } else if constexpr (detail::is_small_float_v<From>) {
        return convert<To>(static_cast<float>(x));
    } else if constexpr (detail::is_small_int_v<From>) {
        return convert<To>(static_cast<int>(x));
    } else if constexpr (detail::is_small_float_v<To>) {
        // One rounding from float/double; integers (and bool) via an exact-enough double.
        if constexpr (std::is_floating_point_v<From>) return To(x);
        else return To(detail::int_to_double_round_odd(x));
    } else if constexpr (detail::is_small_int_v<To>) {
        if constexpr (std::is_floating_point_v<From>) return To(detail::round_even_low_bits(x, To::bits));
        else return To(static_cast<long long>(x));
    } else if constexpr (std::is_same_v<To, bool>) {
        return x != From(0);
    } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
        return detail::float_to_int<To>(x);
    } else {
        return static_cast<To>(x);
    }
}

template <class F>
decltype(auto) visit_type(type t, F&& f) {
    switch (t) {
#define KILN_CASE(E) \
    case type::E: return f(std::type_identity<storage_t<type::E>>{});
        KILN_CASE(bool_)
        KILN_CASE(int8)
        KILN_CASE(int16)
        KILN_CASE(int32)
        KILN_CASE(int64)
        KILN_CASE(uint8)
        KILN_CASE(uint16)
        KILN_CASE(uint32)
        KILN_CASE(uint64)
        KILN_CASE(float16)
        KILN_CASE(bfloat16)
        KILN_CASE(float32)
        KILN_CASE(float64)
        KILN_CASE(float8e4m3fn)
        KILN_CASE(float8e5m2)
        KILN_CASE(float8e4m3fnuz)
        KILN_CASE(float8e5m2fnuz)
        KILN_CASE(float8e8m0)
        KILN_CASE(float4e2m1)
        KILN_CASE(int4)
        KILN_CASE(uint4)
        KILN_CASE(int2)
        KILN_CASE(uint2)
        KILN_CASE(string)
#undef KILN_CASE
    }
    throw_unsupported_type(t, "visit_type");
}

template <class F>
decltype(auto) visit_numeric(type t, F&& f, std::string_view what) {
    if (t == type::string) throw_unsupported_type(t, what);
    return visit_type(t, [&](auto tag) -> decltype(auto) {
        using C = typename decltype(tag)::type;
        if constexpr (std::is_same_v<C, std::string>) {
            throw_unsupported_type(type::string, what);
            return f(std::type_identity<float>{});  // unreachable; keeps return types equal
        } else {
            return f(tag);
        }
    });
}

}  // namespace kiln
