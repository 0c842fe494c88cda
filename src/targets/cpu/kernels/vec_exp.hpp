// exp for Kiln's own vector kernels (cpu::silu, cpu::attention's softmax): 2^B exp(x) for
// x already clamped to where 2^(k+B) is a normal float (k = round(x log2 e)), sixteen lanes
// with AVX-512, eight with AVX2 and FMA, or one value without them.
//
// exp(x) = 2^k exp(r) with x = k ln2 + r, |r| <= ln2/2. Adding `magic` = 1.5 * 2^23 + 127 + B
// to x log2 e rounds it to an integer whose low mantissa bits are k + 127 + B: shifted
// into the exponent field they are 2^(k+B), without a float-to-int conversion. exp(r) is
// a degree-5 polynomial fitted by Remez exchange for the least relative error (2.1e-7
// evaluated in float). The vector path reduces with one ln2 (k ln2 is exact inside the
// FMA); the scalar one, without FMA, splits ln2 so that k ln2_hi is exact.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kiln::cpu::vexp {

constexpr float log2e = 1.442695022e+00f, ln2 = 6.931471825e-01f;
constexpr float ln2_hi = 6.931457520e-01f, ln2_lo = 1.428606765e-06f;  // ln2_hi: 15 significant bits
constexpr float c5 = 8.297654800e-03f, c4 = 4.191538319e-02f, c3 = 1.666757464e-01f, c2 = 4.999889433e-01f,
                c1 = 9.999997020e-01f, c0 = 1.000000119e+00f;

template <int B>
constexpr float magic = 12582912.0f + static_cast<float>(127 + B);

// 2^B exp(x); x must be clamped so that -127 - B < round(x log2 e) < 128 - B.
template <int B>
inline float exp_scaled(float x) {
    const float t = x * log2e + magic<B>;
    const float k = t - magic<B>;
    const float r = (x - k * ln2_hi) - k * ln2_lo;
    const float p = ((((c5 * r + c4) * r + c3) * r + c2) * r + c1) * r + c0;
    std::uint32_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    bits <<= 23;
    float scale;
    std::memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

template <int B>
__attribute__((target("avx2,fma"))) inline __m256 exp_scaled8(__m256 x) {
    const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(log2e), _mm256_set1_ps(magic<B>));
    const __m256 k = _mm256_sub_ps(t, _mm256_set1_ps(magic<B>));
    const __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(ln2), x);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(c5), r, _mm256_set1_ps(c4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c0));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23)));
}

// The same, sixteen lanes (AVX-512 F).
template <int B>
__attribute__((target("avx512f,fma"))) inline __m512 exp_scaled16(__m512 x) {
    const __m512 t = _mm512_fmadd_ps(x, _mm512_set1_ps(log2e), _mm512_set1_ps(magic<B>));
    const __m512 k = _mm512_sub_ps(t, _mm512_set1_ps(magic<B>));
    const __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(ln2), x);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(c5), r, _mm512_set1_ps(c4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c0));
    return _mm512_mul_ps(p, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23)));
}

}  // namespace kiln::cpu::vexp

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
