// The scalar helpers of generated kernels, written once as a macro so that the same text
// is (1) compiled into Kiln for the cpu interpreter (KILN_CODEGEN_HELPERS expanded in a
// namespace) and (2) pasted into every generated source, cpu and gpu (the macro
// stringified: kiln::cpu::codegen::helpers_source, kiln::gpu::codegen::device_source). The code is plain C++ without includes, branch-free where it
// matters, so that GCC vectorizes loops that call it for whatever -march it is given.
//
// Exact helpers, the same expressions as the ops' scalar apply functions:
//   kiln_max / kiln_min  NumPy's maximum/minimum (a NaN operand gives NaN)
//   kiln_sigmoid, kiln_softplus, kiln_mod (Mod of floats; NaN becomes 0 unless fmod = 1)
//
// fast_math approximations (compile_options::fast_math), each within 1e-5 relative error
// of the exact function wherever the result is a normal float (measured about 2e-7; the
// coefficients are minimax fits, see tests/unit/cpu_codegen_fast_math_test.cpp):
//   kiln_fexp(x)      Cody-Waite reduction to [-ln2/2, ln2/2], degree-6 polynomial, and
//                     2^k applied as two factors so that results down to the subnormals and
//                     up to +inf come out right; NaN stays NaN.
//   kiln_fsigmoid(x)  1 / (1 + e) or e / (1 + e) with e = exp(-|x|): never overflows.
//   kiln_ftanh(x)     x * P(x^2) below |x| = 0.625, else 1 - 2 / (exp(2|x|) + 1).
//   kiln_ferf(x)      x * P(x^2) below |x| = 1, a degree-12 polynomial up to 3.93, then 1.
// Comments inside the macro must be /* */ (a // comment would swallow the line splice).
#pragma once

#define KILN_CODEGEN_HELPERS                                                                  \
    static inline float kiln_max(float a, float b) {                                          \
        return a != a ? a : (b != b ? b : (a < b ? b : a));                                   \
    }                                                                                         \
    static inline float kiln_min(float a, float b) {                                          \
        return a != a ? a : (b != b ? b : (b < a ? b : a));                                   \
    }                                                                                         \
    static inline float kiln_sigmoid(float x) {                                               \
        return x > 0.0f ? 1.0f / (1.0f + __builtin_expf(-x))                                  \
                        : __builtin_expf(x) / (1.0f + __builtin_expf(x));                     \
    }                                                                                         \
    static inline float kiln_softplus(float x) {                                              \
        return x > 0.0f ? x + __builtin_log1pf(__builtin_expf(-x))                            \
                        : __builtin_log1pf(__builtin_expf(x));                                \
    }                                                                                         \
    static inline float kiln_mod(float a, float b, bool nan_to_zero) {                        \
        float r = __builtin_fmodf(a, b);                                                      \
        return nan_to_zero && r != r ? 0.0f : r;                                              \
    }                                                                                         \
    static inline float kiln_bits_to_float(unsigned u) {                                      \
        float f;                                                                              \
        __builtin_memcpy(&f, &u, 4);                                                          \
        return f;                                                                             \
    }                                                                                         \
    static inline float kiln_fexp(float x) {                                                  \
        x = x > 89.0f ? 89.0f : x;                                                            \
        x = x < -104.0f ? -104.0f : x;                                                        \
        const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */     \
        float k = (x * 1.442695022e+00f + magic) - magic;                                     \
        k = k != k ? 0.0f : k; /* NaN: any k, the polynomial carries the NaN */               \
        float r = x - k * 6.931457520e-01f;                                                   \
        r = r - k * 1.428606765e-06f;                                                         \
        float p = 1.390128513e-03f;                                                           \
        p = p * r + 8.363140747e-03f;                                                         \
        p = p * r + 4.166685417e-02f;                                                         \
        p = p * r + 1.666657776e-01f;                                                         \
        p = p * r + 5.000000000e-01f;                                                         \
        p = p * r * r + r + 1.0f;                                                             \
        int ki = (int)k;                                                                      \
        int k1 = ki >> 1;                                                                     \
        int k2 = ki - k1;                                                                     \
        float s1 = kiln_bits_to_float((unsigned)(k1 + 127) << 23);                            \
        float s2 = kiln_bits_to_float((unsigned)(k2 + 127) << 23);                            \
        return p * s1 * s2;                                                                   \
    }                                                                                         \
    static inline float kiln_fsigmoid(float x) {                                              \
        float e = kiln_fexp(-__builtin_fabsf(x));                                             \
        float s = 1.0f / (1.0f + e);                                                          \
        return x >= 0.0f ? s : e * s;                                                         \
    }                                                                                         \
    static inline float kiln_ftanh(float x) {                                                 \
        float a = __builtin_fabsf(x);                                                         \
        float x2 = x * x;                                                                     \
        float p = -5.660029594e-03f;                                                          \
        p = p * x2 + 2.059103176e-02f;                                                        \
        p = p * x2 - 5.372108519e-02f;                                                        \
        p = p * x2 + 1.333112717e-01f;                                                        \
        p = p * x2 - 3.333325982e-01f;                                                        \
        p = p * x2 + 1.0f;                                                                    \
        float small = x * p;                                                                  \
        float e = kiln_fexp(a + a);                                                           \
        float big = __builtin_copysignf(1.0f - 2.0f / (e + 1.0f), x);                         \
        return a < 0.625f ? small : big;                                                      \
    }                                                                                         \
    static inline float kiln_ferf(float x) {                                                  \
        float a = __builtin_fabsf(x);                                                         \
        float x2 = x * x;                                                                     \
        float p = 7.853902207e-05f;                                                           \
        p = p * x2 - 8.010207093e-04f;                                                        \
        p = p * x2 + 5.188329611e-03f;                                                        \
        p = p * x2 - 2.685381286e-02f;                                                        \
        p = p * x2 + 1.128358543e-01f;                                                        \
        p = p * x2 - 3.761262596e-01f;                                                        \
        p = p * x2 + 1.128379107e+00f;                                                        \
        float small = x * p;                                                                  \
        float t = (a > 3.93f ? 3.93f : a) - 2.464999914e+00f; /* NaN stays */               \
        float q = -9.124658391e-06f;                                                          \
        q = q * t + 2.487297570e-05f;                                                         \
        q = q * t + 5.304917795e-05f;                                                         \
        q = q * t - 2.990573703e-04f;                                                         \
        q = q * t + 3.776162048e-04f;                                                         \
        q = q * t + 4.775415291e-04f;                                                         \
        q = q * t - 2.947064582e-03f;                                                         \
        q = q * t + 6.708994508e-03f;                                                         \
        q = q * t - 9.735994041e-03f;                                                         \
        q = q * t + 9.636591189e-03f;                                                         \
        q = q * t - 6.389745977e-03f;                                                         \
        q = q * t + 2.591568278e-03f;                                                         \
        q = q * t + 9.995098114e-01f;                                                         \
        q = q > 1.0f ? 1.0f : q;                                                              \
        float big = __builtin_copysignf(q, x);                                                \
        return a < 1.0f ? small : big;                                                        \
    }
