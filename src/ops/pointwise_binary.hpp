// Binary and ternary pointwise functors (see pointwise.hpp for how they are read).
// Integer arithmetic wraps (two's complement), as NumPy's does; integer division and
// remainder by zero give 0 instead of trapping.
#pragma once
#include "ops/pointwise.hpp"
#include "ops/pointwise_scalar.hpp"
#include "ops/pointwise_unary.hpp"

#include <cmath>
#include <string>

namespace kiln::op {

struct add_fn : fn_base<2> {
    static constexpr const char* name = "add";
    static constexpr bool commutative = true;
    using types = numeric_types;
    template <class T>
    static T apply(T x, T y) {
        return scalar::add(x, y);
    }
};

struct sub_fn : fn_base<2> {
    static constexpr const char* name = "sub";
    using types = numeric_types;
    template <class T>
    static T apply(T x, T y) {
        return scalar::sub(x, y);
    }
};

struct mul_fn : fn_base<2> {
    static constexpr const char* name = "mul";
    static constexpr bool commutative = true;
    using types = numeric_types;
    template <class T>
    static T apply(T x, T y) {
        return scalar::mul(x, y);
    }
};

// Integers truncate toward zero (ONNX Div).
struct div_fn : fn_base<2> {
    static constexpr const char* name = "div";
    using types = numeric_types;
    template <class T>
    static T apply(T x, T y) {
        if constexpr (scalar::is_int_v<T>) return scalar::int_div(x, y);
        else return x / y;
    }
};

// The exponent may have any numeric type (Pow-12+). Integer ** integer is exact (wrapping)
// repeated squaring; anything involving a float is computed in double and converted to the
// base's type, as NumPy's power followed by astype(base dtype) does.
struct pow_fn : fn_base<2> {
    static constexpr const char* name = "pow";
    static constexpr unsigned free_inputs = 0b10;
    using types = concat_t<float_types, type_list<std::int32_t, std::int64_t>>;
    using free_types = numeric_types;
    template <class T, class U>
    static T apply(T x, U y) {
        if constexpr (scalar::is_int_v<T> && scalar::is_int_v<U>) {
            if (scalar::is_negative(y)) {
                if (x == T(1)) return T(1);
                if (x == T(-1)) return (y % 2 == 0) ? T(1) : T(-1);
                return T(0);
            }
            T result = 1, base = x;
            for (auto e = y; e != U(0); e = static_cast<U>(e / 2)) {
                if (e % 2 != 0) result = scalar::mul(result, base);
                base = scalar::mul(base, base);
            }
            return result;
        } else {
            return convert<T>(std::pow(static_cast<double>(x), static_cast<double>(y)));
        }
    }
};

// fmod = 0: the result takes the divisor's sign (Python's %), integers only;
// fmod = 1: it takes the dividend's sign (C's fmod). Floats always use fmod (the ONNX
// reference does so even for fmod = 0, mapping NaN to 0 there).
struct mod_fn : fn_base<2> {
    static constexpr const char* name = "mod";
    using types = numeric_types;
    bool fmod = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.fmod, "fmod");
    }
    template <class T>
    T apply(T x, T y) const {
        if constexpr (std::is_floating_point_v<T>) {
            T r = std::fmod(x, y);
            return !fmod && std::isnan(r) ? T(0) : r;
        } else {
            T r = scalar::int_rem(x, y);
            if constexpr (std::is_signed_v<T>)
                if (!fmod && r != T(0) && ((r < T(0)) != (y < T(0)))) r = scalar::add(r, y);
            return r;
        }
    }
};

struct max_fn : fn_base<2> {
    static constexpr const char* name = "max";
    static constexpr bool commutative = true;
    using types = numeric_types;
    template <class T>
    static T apply(T x, T y) {
        return scalar::max(x, y);
    }
};

struct min_fn : fn_base<2> {
    static constexpr const char* name = "min";
    static constexpr bool commutative = true;
    using types = numeric_types;
    template <class T>
    static T apply(T x, T y) {
        return scalar::min(x, y);
    }
};

#define KILN_LOGICAL_FN(STRUCT, NAME, EXPR)                  \
    struct STRUCT : fn_base<2> {                             \
        static constexpr const char* name = NAME;            \
        static constexpr bool commutative = true;            \
        using types = type_list<bool>;                       \
        static bool apply(bool x, bool y) { return EXPR; }   \
    };
KILN_LOGICAL_FN(logical_and_fn, "logical_and", x && y)
KILN_LOGICAL_FN(logical_or_fn, "logical_or", x || y)
KILN_LOGICAL_FN(logical_xor_fn, "logical_xor", x != y)
#undef KILN_LOGICAL_FN

#define KILN_BITWISE_FN(STRUCT, NAME, OP)                    \
    struct STRUCT : fn_base<2> {                             \
        static constexpr const char* name = NAME;            \
        static constexpr bool commutative = true;            \
        using types = int_types;                             \
        template <class T>                                   \
        static T apply(T x, T y) {                           \
            return static_cast<T>(x OP y);                   \
        }                                                    \
    };
KILN_BITWISE_FN(bitwise_and_fn, "bitwise_and", &)
KILN_BITWISE_FN(bitwise_or_fn, "bitwise_or", |)
KILN_BITWISE_FN(bitwise_xor_fn, "bitwise_xor", ^)
#undef KILN_BITWISE_FN

// direction: "left" or "right". Shifting by the width of the type or more gives 0.
struct bit_shift_fn : fn_base<2> {
    static constexpr const char* name = "bit_shift";
    using types = unsigned_int_types;
    std::string direction = "left";
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.direction, "direction");
    }
    template <class T>
    T apply(T x, T y) const {
        if (y >= T(8 * sizeof(T))) return T(0);
        const auto w = static_cast<scalar::wrap_t<T>>(x);
        return static_cast<T>(direction == "left" ? w << y : w >> y);
    }
};

// Comparisons: bool results. equal also takes bool and string.
#define KILN_COMPARE_FN(STRUCT, NAME, OP, TYPES, COMM)       \
    struct STRUCT : fn_base<2> {                             \
        static constexpr const char* name = NAME;            \
        static constexpr bool predicate = true;              \
        static constexpr bool commutative = COMM;            \
        using types = TYPES;                                 \
        template <class T>                                   \
        static bool apply(const T& x, const T& y) {          \
            return x OP y;                                   \
        }                                                    \
    };
using equal_types = concat_t<type_list<bool>, numeric_types, type_list<std::string>>;
KILN_COMPARE_FN(equal_fn, "equal", ==, equal_types, true)
KILN_COMPARE_FN(less_fn, "less", <, numeric_types, false)
KILN_COMPARE_FN(greater_fn, "greater", >, numeric_types, false)
KILN_COMPARE_FN(less_or_equal_fn, "less_or_equal", <=, numeric_types, false)
KILN_COMPARE_FN(greater_or_equal_fn, "greater_or_equal", >=, numeric_types, false)
#undef KILN_COMPARE_FN

// x > 0 ? x : slope * x (slope broadcast to x).
struct prelu_fn : fn_base<2> {
    static constexpr const char* name = "prelu";
    using types = concat_t<float_types, type_list<std::int32_t, std::int64_t, std::uint32_t, std::uint64_t>>;
    template <class T>
    static T apply(T x, T slope) {
        return x > T(0) ? x : scalar::mul(x, slope);
    }
};

// swish(a) * b with swish(a) = a * sigmoid(alpha * a); a and b have equal shapes.
struct swiglu_fn : fn_base<2> {
    static constexpr const char* name = "swiglu";
    static constexpr bool broadcast = false;
    using types = float_types;
    float alpha = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
    }
    template <class T>
    T apply(T a, T b) const {
        return a * sigmoid_fn::apply(static_cast<T>(alpha) * a) * b;
    }
};

// where(condition, x, y): x where condition, else y. Any element type, strings too;
// elements are copied as stored (fp8 NaN payloads, -0 and all).
struct where_fn : fn_base<3> {
    static constexpr const char* name = "where";
    static constexpr unsigned bool_inputs = 0b001;
    static constexpr bool on_storage = true;
    using types = all_types;
    template <class T>
    static T apply(bool c, const T& x, const T& y) {
        return c ? x : y;
    }
};

// clip(x, lo, hi) = min(max(x, lo), hi): when lo > hi every element becomes hi, as ONNX
// specifies. The ONNX frontend fills absent bounds with the type's lowest/highest value.
struct clip_fn : fn_base<3> {
    static constexpr const char* name = "clip";
    using types = numeric_types;
    template <class T>
    static T apply(T x, T lo, T hi) {
        return scalar::min(scalar::max(x, lo), hi);
    }
};

// Every binary and ternary functor, by base name (see KILN_UNARY_POINTWISE).
#define KILN_BINARY_POINTWISE(X) X(add) X(sub) X(mul) X(div) X(pow) X(mod) X(max) X(min) X(logical_and) X(logical_or) X(logical_xor) X(bitwise_and) X(bitwise_or) X(bitwise_xor) X(bit_shift) X(equal) X(less) X(greater) X(less_or_equal) X(greater_or_equal) X(prelu) X(swiglu) X(where) X(clip)

KILN_BINARY_POINTWISE(KILN_POINTWISE_ALIAS)
KILN_BINARY_POINTWISE(KILN_POINTWISE_EXTERN)

}  // namespace kiln::op
