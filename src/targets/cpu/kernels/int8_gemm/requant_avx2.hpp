// The requantize of int8_gemm_args.hpp on 8 or 16 accumulators in ymm registers, for the
// AVX2 kernels (include only from files whose functions carry I8_AVX2). Compiled without
// FMA on purpose: a fused multiply-add would round once where ref rounds twice.
#pragma once
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/kernels/int8_gemm/requant_generic.hpp"

#include <immintrin.h>

#include <cstring>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

#define I8_AVX2 __attribute__((target("avx2")))

namespace kiln::cpu::i8g {

// The real values of channels [c, c + 8): acc already holds comp.
I8_AVX2 inline __m256 real8(const requant& q, __m256i acc, std::size_t c) {
    if (q.f32_exact) return _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_loadu_ps(q.scale + c));
    __m256d lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(acc));
    __m256d hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(acc, 1));
    lo = _mm256_add_pd(lo, _mm256_loadu_pd(q.ibias + c));
    hi = _mm256_add_pd(hi, _mm256_loadu_pd(q.ibias + c + 4));
    lo = _mm256_mul_pd(lo, _mm256_loadu_pd(q.dscale + c));
    hi = _mm256_mul_pd(hi, _mm256_loadu_pd(q.dscale + c + 4));
    lo = _mm256_add_pd(lo, _mm256_loadu_pd(q.fbias + c));
    hi = _mm256_add_pd(hi, _mm256_loadu_pd(q.fbias + c + 4));
    return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo));
}

// Output levels (int32) of 8 real values: round_half_even(v / y_scale) + y_zero, clamped.
// The quotient by a multiplication with 1 / y_scale (vdivps costs as much as the 6 x 16
// tile's products at small k): t = v * fl(1 / y_scale) is within |t| 2^-22 of the correctly
// rounded quotient, so both round to the same integer unless t lies within |t| 2^-20 of a
// half-integer; then (rarely) the lanes are divided as ref does.
I8_AVX2 inline __m256i levels8(const requant& q, __m256 v) {
    const __m256 t = _mm256_mul_ps(v, _mm256_set1_ps(q.y_inv));
    __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256 gap = _mm256_sub_ps(_mm256_set1_ps(0.5f), _mm256_andnot_ps(sign, _mm256_sub_ps(t, r)));
    const __m256 tol = _mm256_mul_ps(_mm256_andnot_ps(sign, t), _mm256_set1_ps(1.0f / 1048576.0f));
    if (_mm256_movemask_ps(_mm256_cmp_ps(gap, tol, _CMP_LE_OQ)) != 0)
        r = _mm256_round_ps(_mm256_div_ps(v, _mm256_set1_ps(q.y_scale)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm256_add_ps(r, _mm256_set1_ps(q.y_zero));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(q.y_min)), _mm256_set1_ps(q.y_max));
    return _mm256_cvtps_epi32(r);
}

// levels8 for f32_exact accumulators (acc holds comp), one product fewer: t = float(acc) *
// qscale[c] is within 5 2^-24 |t| of ref's quotient (three roundings against two), so
// where |t| < 2^10 both round alike unless t is within 2^-10 of a half-integer (then ref's
// steps run for those lanes); where |t| >= 2^10 both clamp to the same end of the range.
I8_AVX2 inline __m256i exact_levels8(const requant& q, __m256i acc, std::size_t c) {
    const __m256 af = _mm256_cvtepi32_ps(acc);
    const __m256 t = _mm256_mul_ps(af, _mm256_loadu_ps(q.qscale + c));
    __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 gap =
        _mm256_sub_ps(_mm256_set1_ps(0.5f), _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(t, r)));
    if (_mm256_movemask_ps(_mm256_cmp_ps(gap, _mm256_set1_ps(1.0f / 1024.0f), _CMP_LE_OQ)) != 0) {
        const __m256 v = _mm256_mul_ps(af, _mm256_loadu_ps(q.scale + c));
        r = _mm256_round_ps(_mm256_div_ps(v, _mm256_set1_ps(q.y_scale)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    r = _mm256_add_ps(r, _mm256_set1_ps(q.y_zero));
    r = _mm256_min_ps(_mm256_max_ps(r, _mm256_set1_ps(q.y_min)), _mm256_set1_ps(q.y_max));
    return _mm256_cvtps_epi32(r);
}

// exact_levels8 for loops that requantize many vectors of the same channels: the constants
// held in registers by the caller, the result minus y_zero (clamped to [y_min - y_zero,
// y_max - y_zero], within [-255, 255]) for the caller to add in int16 after narrowing.
// qscale and scale: the lanes' fl(scale * fl(1 / y_scale)) and scale.
struct exact_consts {
    __m256 near_half, abs_mask, lo, hi, y_scale;
    __m256i y_zero16;
};

I8_AVX2 inline exact_consts exact_consts_of(const requant& q) {
    exact_consts k;
    k.near_half = _mm256_set1_ps(0.5f - 1.0f / 1024.0f);  // |t - r| >= this: exact_levels8's gap <= 2^-10
    k.abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    k.lo = _mm256_set1_ps(q.y_min - q.y_zero);  // small integers: exact
    k.hi = _mm256_set1_ps(q.y_max - q.y_zero);
    k.y_scale = _mm256_set1_ps(q.y_scale);
    k.y_zero16 = _mm256_set1_epi16(static_cast<std::int16_t>(q.y_zero));
    return k;
}

I8_AVX2 inline __m256i exact_offsets8(const exact_consts& k, __m256i acc, __m256 qscale, __m256 scale) {
    const __m256 af = _mm256_cvtepi32_ps(acc);
    const __m256 t = _mm256_mul_ps(af, qscale);
    __m256 r = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_sub_ps(t, r), k.abs_mask), k.near_half, _CMP_GE_OQ)) != 0)
        r = _mm256_round_ps(_mm256_div_ps(_mm256_mul_ps(af, scale), k.y_scale),
                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, k.lo), k.hi));
}

// Stores 16 bytes (width <= 16 of them) of 16 channels' int16 offsets from exact_offsets8,
// adding y_zero; w in channel order.
I8_AVX2 inline void store_levels16(const exact_consts& k, bool unsigned_out, void* y, __m256i w, std::size_t width) {
    w = _mm256_add_epi16(w, k.y_zero16);  // within [-128, 255]: nothing saturates below
    const __m128i a = _mm256_castsi256_si128(w), c = _mm256_extracti128_si256(w, 1);
    const __m128i bytes = unsigned_out ? _mm_packus_epi16(a, c) : _mm_packs_epi16(a, c);
    if (width == 16)
        _mm_storeu_si128(static_cast<__m128i*>(y), bytes);
    else {
        alignas(16) std::uint8_t tmp[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(tmp), bytes);
        std::memcpy(y, tmp, width);
    }
}

// Stores channels [c, c + width) (width <= 16) of one output row from two accumulator
// vectors (channels c..c+7 and c+8..c+15, comp not yet added); y points at channel c.
I8_AVX2 inline void store16(const requant& q, void* y, __m256i a0, __m256i a1, std::size_t c, std::size_t width) {
    a0 = _mm256_add_epi32(a0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.comp + c)));
    a1 = _mm256_add_epi32(a1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.comp + c + 8)));
    if (q.out == out_kind::f32) {
        const __m256 v0 = real8(q, a0, c), v1 = real8(q, a1, c + 8);
        float* out = static_cast<float*>(y);
        if (width == 16) {
            _mm256_storeu_ps(out, v0);
            _mm256_storeu_ps(out + 8, v1);
        } else {
            alignas(32) float tmp[16];
            _mm256_store_ps(tmp, v0);
            _mm256_store_ps(tmp + 8, v1);
            std::memcpy(out, tmp, width * sizeof(float));
        }
        return;
    }
    const __m256i l0 = q.f32_exact ? exact_levels8(q, a0, c) : levels8(q, real8(q, a0, c));
    const __m256i l1 = q.f32_exact ? exact_levels8(q, a1, c + 8) : levels8(q, real8(q, a1, c + 8));
    // In range already: the saturating packs only narrow.
    const __m128i w0 = _mm_packs_epi32(_mm256_castsi256_si128(l0), _mm256_extracti128_si256(l0, 1));
    const __m128i w1 = _mm_packs_epi32(_mm256_castsi256_si128(l1), _mm256_extracti128_si256(l1, 1));
    const __m128i b = q.out == out_kind::u8 ? _mm_packus_epi16(w0, w1) : _mm_packs_epi16(w0, w1);
    if (width == 16)
        _mm_storeu_si128(static_cast<__m128i*>(y), b);
    else {
        alignas(16) std::uint8_t tmp[16];
        _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b);
        std::memcpy(y, tmp, width);
    }
}

inline void* element(const requant& q, void* base, std::size_t at) {
    const std::size_t size = q.out == out_kind::f32 ? 4 : 1;
    return static_cast<char*>(base) + at * size;
}

}  // namespace kiln::cpu::i8g
