// The post-ops Kiln's own kernels (Winograd convolution, packed GEMM) apply in their
// epilogues: the subset of oneDNN post-ops they implement (fused_post_kind_of in
// post_ops.hpp maps one to the other). Plain data, so the ISA variants can include it.
#pragma once

namespace kiln::cpu {

// hardswish: x * min(max(x / 6 + 1/2, 0), 1), as ONNX HardSwish writes it (the packed GEMM only).
enum class fused_post_kind : int { relu, linear, clip, gelu_erf, hardswish, add, sub, mul, max, min };

// add..min read a second operand.
constexpr bool is_binary(fused_post_kind k) { return k >= fused_post_kind::add; }

// gelu_erf: 0.5 x (1 + erf(x / sqrt 2)), erf as the generated kernels' fast_math one
// (codegen/fast_math.hpp, kiln_ferf): x P(x^2) below |x| = 1, a degree-12 polynomial in
// |x| - 2.465 up to 3.93 (capped at 1), 1 beyond, with x's sign. The coefficients:
namespace gelu_coef {
constexpr float inv_sqrt2 = 0.70710678118654752440f;
constexpr float small_cut = 1.0f, big_cap = 3.93f, big_center = 2.464999914e+00f;
constexpr float p[7] = {7.853902207e-05f,  -8.010207093e-04f, 5.188329611e-03f, -2.685381286e-02f,
                        1.128358543e-01f, -3.761262596e-01f, 1.128379107e+00f};
constexpr float q[13] = {-9.124658391e-06f, 2.487297570e-05f,  5.304917795e-05f, -2.990573703e-04f,
                         3.776162048e-04f,  4.775415291e-04f,  -2.947064582e-03f, 6.708994508e-03f,
                         -9.735994041e-03f, 9.636591189e-03f,  -6.389745977e-03f, 2.591568278e-03f,
                         9.995098114e-01f};
}  // namespace gelu_coef

inline float gelu_erf_scalar(float v) {
    using namespace gelu_coef;
    const float x = v * inv_sqrt2, a = x < 0.0f ? -x : x, x2 = x * x;
    float p = gelu_coef::p[0];
    for (int i = 1; i < 7; ++i) p = p * x2 + gelu_coef::p[i];
    const float t = (a > big_cap ? big_cap : a) - big_center;  // NaN stays NaN
    float q = gelu_coef::q[0];
    for (int i = 1; i < 13; ++i) q = q * t + gelu_coef::q[i];
    q = q > 1.0f ? 1.0f : q;
    const float erf = a < small_cut ? x * p : (x < 0.0f ? -q : q);
    return 0.5f * v * (1.0f + erf);
}

}  // namespace kiln::cpu
