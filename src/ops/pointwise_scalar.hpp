// Scalar helpers the pointwise functors share: integer arithmetic that wraps instead of
// overflowing (signed overflow is undefined behaviour in C++, and int8/uint16 operands
// are promoted to int first), and small predicates that avoid always-false comparisons
// on unsigned types (-Wtype-limits).
#pragma once
#include <cmath>
#include <limits>
#include <type_traits>

namespace kiln::op::scalar {

template <class T>
constexpr bool is_int_v = std::is_integral_v<T> && !std::is_same_v<T, bool>;

// The unsigned type integer arithmetic on T wraps in: at least `unsigned`, so that
// uint16 * uint16 does not promote to a signed int and overflow.
template <class T>
using wrap_t = std::make_unsigned_t<std::common_type_t<T, unsigned>>;

template <class T>
constexpr T add(T a, T b) {
    if constexpr (is_int_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) + static_cast<wrap_t<T>>(b));
    else return a + b;
}
template <class T>
constexpr T sub(T a, T b) {
    if constexpr (is_int_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) - static_cast<wrap_t<T>>(b));
    else return a - b;
}
template <class T>
constexpr T mul(T a, T b) {
    if constexpr (is_int_v<T>) return static_cast<T>(static_cast<wrap_t<T>>(a) * static_cast<wrap_t<T>>(b));
    else return a * b;
}
template <class T>
constexpr bool is_negative(T x) {
    if constexpr (std::is_signed_v<T> || std::is_floating_point_v<T>) return x < T(0);
    else return false;
}
// NumPy's maximum/minimum: a NaN operand gives NaN (std::fmax would drop it).
template <class T>
constexpr T max(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
    }
    return a < b ? b : a;
}
template <class T>
constexpr T min(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
        if (std::isnan(a)) return a;
        if (std::isnan(b)) return b;
    }
    return b < a ? b : a;
}
// Integer division truncating toward zero (ONNX Div). Division by zero, undefined in
// ONNX and a crash in C++, gives 0 (what NumPy returns); INT_MIN / -1 wraps.
template <class T>
constexpr T int_div(T a, T b) {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return sub(T(0), a);
    return static_cast<T>(a / b);
}
// Truncated remainder (C's %, NumPy's fmod); x % 0 gives 0.
template <class T>
constexpr T int_rem(T a, T b) {
    if (b == T(0)) return T(0);
    if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(0);
    return static_cast<T>(a % b);
}

}  // namespace kiln::op::scalar
