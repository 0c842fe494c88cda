// Unary pointwise functors (see pointwise.hpp for how they are read). Each `apply` is the
// ONNX formula written in the compute type T (float for fp16/bf16); where the ONNX
// reference evaluates a formula in a particular order (elu's exp(x) - 1, selu's
// exp(x) * alpha - alpha), apply keeps that order and its rounding steps (stable forms
// are used only where the plain formula overflows: sigmoid, softplus).
#pragma once
#include "ops/pointwise.hpp"
#include "ops/pointwise_scalar.hpp"

#include <cmath>
#include <string>

namespace kiln::op {

// Ops that are exactly one <cmath> function on the float types.
#define KILN_FLOAT_MATH_FN(BASE, NAME, EXPR)                            \
    struct BASE##_fn : fn_base<1> {                                     \
        static constexpr const char* name = NAME;                       \
        using types = float_types;                                      \
        template <class T>                                              \
        static T apply(T x) {                                           \
            return EXPR;                                                \
        }                                                               \
    };
KILN_FLOAT_MATH_FN(exp, "exp", std::exp(x))
KILN_FLOAT_MATH_FN(log, "log", std::log(x))
KILN_FLOAT_MATH_FN(sqrt, "sqrt", std::sqrt(x))
KILN_FLOAT_MATH_FN(reciprocal, "reciprocal", T(1) / x)
KILN_FLOAT_MATH_FN(sin, "sin", std::sin(x))
KILN_FLOAT_MATH_FN(cos, "cos", std::cos(x))
KILN_FLOAT_MATH_FN(tan, "tan", std::tan(x))
KILN_FLOAT_MATH_FN(asin, "asin", std::asin(x))
KILN_FLOAT_MATH_FN(acos, "acos", std::acos(x))
KILN_FLOAT_MATH_FN(atan, "atan", std::atan(x))
KILN_FLOAT_MATH_FN(sinh, "sinh", std::sinh(x))
KILN_FLOAT_MATH_FN(cosh, "cosh", std::cosh(x))
KILN_FLOAT_MATH_FN(asinh, "asinh", std::asinh(x))
KILN_FLOAT_MATH_FN(acosh, "acosh", std::acosh(x))
KILN_FLOAT_MATH_FN(atanh, "atanh", std::atanh(x))
KILN_FLOAT_MATH_FN(tanh, "tanh", std::tanh(x))
KILN_FLOAT_MATH_FN(floor, "floor", std::floor(x))
KILN_FLOAT_MATH_FN(ceil, "ceil", std::ceil(x))
// Half to even: nearbyint rounds in the current mode, which is round-to-nearest-even.
KILN_FLOAT_MATH_FN(round, "round", std::nearbyint(x))
// Stable on both sides: exp of a large positive number never overflows.
KILN_FLOAT_MATH_FN(sigmoid, "sigmoid",
                   x > T(0) ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x)))
// log(1 + exp(x)) without overflow for large x.
KILN_FLOAT_MATH_FN(softplus, "softplus", x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)))
KILN_FLOAT_MATH_FN(softsign, "softsign", x / (T(1) + std::fabs(x)))
KILN_FLOAT_MATH_FN(hard_swish, "hard_swish",
                   x * scalar::max(T(0), scalar::min(T(1), x * static_cast<T>(1.0 / 6.0) + T(0.5))))
KILN_FLOAT_MATH_FN(mish, "mish", x * std::tanh(softplus_fn::apply(x)))
#undef KILN_FLOAT_MATH_FN

struct abs_fn : fn_base<1> {
    static constexpr const char* name = "abs";
    using types = numeric_types;
    template <class T>
    static T apply(T x) {
        if constexpr (std::is_floating_point_v<T>) return std::fabs(x);
        else if constexpr (std::is_signed_v<T>) return x < T(0) ? scalar::sub(T(0), x) : x;
        else return x;
    }
};

struct neg_fn : fn_base<1> {
    static constexpr const char* name = "neg";
    using types = signed_numeric_types;
    template <class T>
    static T apply(T x) {
        return scalar::sub(T(0), x);
    }
};

struct sign_fn : fn_base<1> {
    static constexpr const char* name = "sign";
    using types = numeric_types;
    template <class T>
    static T apply(T x) {
        if (x > T(0)) return T(1);
        if (scalar::is_negative(x)) return static_cast<T>(-1);
        return x;  // 0 (keeps -0 and NaN as they are)
    }
};

// Erf allows every numeric type; integers go through double.
struct erf_fn : fn_base<1> {
    static constexpr const char* name = "erf";
    using types = numeric_types;
    template <class T>
    static T apply(T x) {
        if constexpr (std::is_floating_point_v<T>) return std::erf(x);
        else return static_cast<T>(std::erf(static_cast<double>(x)));
    }
};

// max(x, 0); NaN stays NaN (NumPy's maximum propagates it).
struct relu_fn : fn_base<1> {
    static constexpr const char* name = "relu";
    using types = signed_numeric_types;
    template <class T>
    static T apply(T x) {
        return scalar::is_negative(x) ? T(0) : x;
    }
};

struct leaky_relu_fn : fn_base<1> {
    static constexpr const char* name = "leaky_relu";
    using types = float_types;
    float alpha = 0.01f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
    }
    template <class T>
    T apply(T x) const {
        return x < T(0) ? x * static_cast<T>(alpha) : x;
    }
};

struct elu_fn : fn_base<1> {
    static constexpr const char* name = "elu";
    using types = float_types;
    float alpha = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
    }
    template <class T>
    T apply(T x) const {
        return x > T(0) ? x : static_cast<T>(alpha) * (std::exp(x) - T(1));
    }
};

struct selu_fn : fn_base<1> {
    static constexpr const char* name = "selu";
    using types = float_types;
    float alpha = 1.67326319217681884765625f;
    float gamma = 1.05070102214813232421875f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
        f(self.gamma, "gamma");
    }
    template <class T>
    T apply(T x) const {
        const T a = static_cast<T>(alpha);
        return (x > T(0) ? x : std::exp(x) * a - a) * static_cast<T>(gamma);
    }
};

struct celu_fn : fn_base<1> {
    static constexpr const char* name = "celu";
    using types = float_types;
    float alpha = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
    }
    template <class T>
    T apply(T x) const {
        const T a = static_cast<T>(alpha);
        return scalar::max(T(0), x) + scalar::min(T(0), a * (std::exp(x / a) - T(1)));
    }
};

struct hard_sigmoid_fn : fn_base<1> {
    static constexpr const char* name = "hard_sigmoid";
    using types = float_types;
    float alpha = 0.2f;
    float beta = 0.5f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
        f(self.beta, "beta");
    }
    template <class T>
    T apply(T x) const {
        return scalar::max(T(0), scalar::min(T(1), x * static_cast<T>(alpha) + static_cast<T>(beta)));
    }
};

struct thresholded_relu_fn : fn_base<1> {
    static constexpr const char* name = "thresholded_relu";
    using types = float_types;
    float alpha = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
    }
    template <class T>
    T apply(T x) const {
        return x > static_cast<T>(alpha) ? x : T(0);
    }
};

// approximate: "none" (the erf form) or "tanh".
struct gelu_fn : fn_base<1> {
    static constexpr const char* name = "gelu";
    using types = float_types;
    std::string approximate = "none";
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.approximate, "approximate");
    }
    template <class T>
    T apply(T x) const {
        if (approximate == "tanh") {
            const T k = static_cast<T>(0.79788456080286535588);  // sqrt(2 / pi)
            return T(0.5) * x * (T(1) + std::tanh(k * (x + static_cast<T>(0.044715) * x * x * x)));
        }
        return T(0.5) * x * (T(1) + std::erf(x * static_cast<T>(0.70710678118654752440)));
    }
};

struct swish_fn : fn_base<1> {
    static constexpr const char* name = "swish";
    using types = float_types;
    float alpha = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
    }
    template <class T>
    T apply(T x) const {
        return x * sigmoid_fn::apply(static_cast<T>(alpha) * x);
    }
};

// Types the NaN/inf tests accept: the float types and the fp8 formats.
using float_and_fp8_types = concat_t<float_types, fp8_types>;

struct isnan_fn : fn_base<1> {
    static constexpr const char* name = "isnan";
    static constexpr bool predicate = true;
    using types = float_and_fp8_types;
    template <class T>
    static bool apply(T x) {
        return std::isnan(x);
    }
};

struct isinf_fn : fn_base<1> {
    static constexpr const char* name = "isinf";
    static constexpr bool predicate = true;
    using types = float_and_fp8_types;
    bool detect_negative = true;
    bool detect_positive = true;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.detect_negative, "detect_negative");
        f(self.detect_positive, "detect_positive");
    }
    template <class T>
    bool apply(T x) const {
        return std::isinf(x) && (x > T(0) ? detect_positive : detect_negative);
    }
};

// x < -lambd: x + bias; x > lambd: x - bias; else 0. Integers compare and add in double.
struct shrink_fn : fn_base<1> {
    static constexpr const char* name = "shrink";
    using types = numeric_types;
    float bias = 0.0f;
    float lambd = 0.5f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.bias, "bias");
        f(self.lambd, "lambd");
    }
    template <class T>
    T apply(T x) const {
        using C = std::conditional_t<std::is_floating_point_v<T>, T, double>;
        const C v = static_cast<C>(x), l = static_cast<C>(lambd), b = static_cast<C>(bias);
        if (v < -l) return convert<T>(v + b);
        if (v > l) return convert<T>(v - b);
        return T(0);
    }
};

struct logical_not_fn : fn_base<1> {
    static constexpr const char* name = "logical_not";
    using types = type_list<bool>;
    static bool apply(bool x) { return !x; }
};

struct bitwise_not_fn : fn_base<1> {
    static constexpr const char* name = "bitwise_not";
    using types = int_types;
    template <class T>
    static T apply(T x) {
        return static_cast<T>(~x);
    }
};

// Every unary functor, by base name (X(relu) -> relu_fn, relu_op).
#define KILN_UNARY_POINTWISE(X) X(exp) X(log) X(sqrt) X(reciprocal) X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(asinh) X(acosh) X(atanh) X(tanh) X(floor) X(ceil) X(round) X(sigmoid) X(softplus) X(softsign) X(hard_swish) X(mish) X(abs) X(neg) X(sign) X(erf) X(relu) X(leaky_relu) X(elu) X(selu) X(celu) X(hard_sigmoid) X(thresholded_relu) X(gelu) X(swish) X(isnan) X(isinf) X(shrink) X(logical_not) X(bitwise_not)

KILN_UNARY_POINTWISE(KILN_POINTWISE_ALIAS)
KILN_UNARY_POINTWISE(KILN_POINTWISE_EXTERN)

}  // namespace kiln::op
