// The packed GEMM's micro-kernels for CPUs with AVX-512 (F, DQ, VL, BW), chosen at load
// time (packed_gemm.cpp): only these functions carry the target attribute, so the rest of
// the build stays at the baseline ISA.
//
// A 16-column panel of B is one zmm row. A tile covers two panels (32 columns) and up to
// 12 rows: 24 zmm accumulators, two B vectors and one broadcast of A per k step, so that
// the loads (13 per 24 FMAs) keep up with two FMA pipes. The last panel of a part, when
// the part has an odd number, runs as a one-panel tile. Partial panels use lane masks;
// channel-blocked C with 8-channel blocks stores each panel as two 8-lane halves.
#include "targets/cpu/packed_gemm_args.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's _mm512_max_ps / _mm512_min_ps pass _mm512_undefined_ps() as the unused merge
// source, which its own flow analysis then reports as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::cpu::pgemm {
namespace {

#define PG_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))

constexpr int max_rows = 12;

// The lanes of a panel that exist (its columns below n).
PG_TARGET inline __mmask16 lanes(std::size_t width) {
    return width >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << width) - 1u);
}

// 16 values of one row of one panel: lanes 0-7 at p, lanes 8-15 at p + half1 (8 unless C
// is blocked by 8 channels, where the panel's second half is in the next channel block).
PG_TARGET inline __m512 load16(const float* p, std::size_t half1, __mmask16 m) {
    if (half1 == 8) return _mm512_maskz_loadu_ps(m, p);
    const __m256 lo = _mm256_maskz_loadu_ps(static_cast<__mmask8>(m), p);
    const __m256 hi = _mm256_maskz_loadu_ps(static_cast<__mmask8>(m >> 8), p + half1);
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

PG_TARGET inline void store16(float* p, std::size_t half1, __mmask16 m, __m512 v) {
    if (half1 == 8) {
        _mm512_mask_storeu_ps(p, m, v);
        return;
    }
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>(m), _mm512_castps512_ps256(v));
    _mm256_mask_storeu_ps(p + half1, static_cast<__mmask8>(m >> 8), _mm512_extractf32x8_ps(v, 1));
}

PG_TARGET inline __m512 apply(const post_step& s, __m512 v, const float* src, std::size_t half1, __mmask16 m) {
    switch (s.kind) {
    case post_kind::linear: return _mm512_fmadd_ps(_mm512_set1_ps(s.alpha), v, _mm512_set1_ps(s.beta));
    case post_kind::relu:
        if (s.alpha == 0.0f) return _mm512_max_ps(v, _mm512_setzero_ps());
        return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_GT_OQ),
                                    _mm512_mul_ps(v, _mm512_set1_ps(s.alpha)), v);
    case post_kind::clip:
        return _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(s.alpha)), _mm512_set1_ps(s.beta));
    case post_kind::add: return _mm512_add_ps(v, load16(src, half1, m));
    case post_kind::sub: return _mm512_sub_ps(v, load16(src, half1, m));
    case post_kind::mul: return _mm512_mul_ps(v, load16(src, half1, m));
    case post_kind::max: return _mm512_max_ps(v, load16(src, half1, m));
    case post_kind::min: return _mm512_min_ps(v, load16(src, half1, m));
    }
    return v;
}

// One R x (16 P) tile: rows [i, i + R) of C, panels [p, p + P), k in [k0, k0 + kc).
// With Ahead, the tile prefetches one B row (a cache line) per panel per k step of the
// next panels' block at `ahead` (the first tile of each panel pair: B streams from memory
// once, and without this the first tile of every pair waits for it).
template <int R, int P, bool Ahead, bool Blocked>
PG_TARGET void tile(const args& g, std::size_t i, std::size_t p, std::size_t k0, std::size_t kc, bool first,
                    bool last, const __mmask16* mask, const float* ahead, int ahead_panels) {
    const std::size_t lda = a_stride(g), ldc = g.ldc ? g.ldc : g.n;
    const float* a = g.a + i * lda + k0;
    const float* b[P];
    std::size_t col[P], at[P], half1[P];
    for (int q = 0; q < P; ++q) {
        b[q] = g.b + ((p + static_cast<std::size_t>(q)) * g.k + k0) * panel;
        col[q] = (p + static_cast<std::size_t>(q)) * panel;
        at[q] = Blocked ? col_offset(g, col[q]) : col[q];
        half1[q] = Blocked ? col_offset(g, col[q] + 8) - at[q] : 8;
    }
    std::size_t row_at[R];
    for (int r = 0; r < R; ++r)
        row_at[r] = Blocked ? row_offset(g, i + static_cast<std::size_t>(r)) : (i + static_cast<std::size_t>(r)) * ldc;
    __m512 acc[R][P];
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < P; ++q)
            acc[r][q] = first ? _mm512_setzero_ps() : load16(g.c + row_at[r] + at[q], half1[q], mask[q]);
#pragma GCC unroll 2
    for (std::size_t k = 0; k < kc; ++k) {
        if constexpr (Ahead) {
            _mm_prefetch(reinterpret_cast<const char*>(ahead + k * panel), _MM_HINT_T1);
            if (ahead_panels > 1) _mm_prefetch(reinterpret_cast<const char*>(ahead + (g.k + k) * panel), _MM_HINT_T1);
        }
        __m512 bv[P];
        for (int q = 0; q < P; ++q) bv[q] = _mm512_loadu_ps(b[q] + k * panel);
#pragma GCC unroll 12
        for (int r = 0; r < R; ++r) {
            const __m512 av = _mm512_set1_ps(a[static_cast<std::size_t>(r) * lda + k]);
            for (int q = 0; q < P; ++q) acc[r][q] = _mm512_fmadd_ps(av, bv[q], acc[r][q]);
        }
    }
    if (last) {
        if (g.bias)
            for (int q = 0; q < P; ++q) {
                const __m512 bias = _mm512_maskz_loadu_ps(mask[q], g.bias + col[q]);
#pragma GCC unroll 12
                for (int r = 0; r < R; ++r) acc[r][q] = _mm512_add_ps(acc[r][q], bias);
            }
        for (int s = 0; s < g.n_post; ++s) {
            const post_step& st = g.post[s];
#pragma GCC unroll 12
            for (int r = 0; r < R; ++r)
                for (int q = 0; q < P; ++q) {
                    if (st.src && st.full)
                        acc[r][q] = apply(st, acc[r][q], st.src + row_at[r] + at[q], half1[q], mask[q]);
                    else
                        acc[r][q] = apply(st, acc[r][q], st.src ? st.src + col[q] : nullptr, 8, mask[q]);
                }
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r)
        for (int q = 0; q < P; ++q) store16(g.c + row_at[r] + at[q], half1[q], mask[q], acc[r][q]);
}

// Rows [i, i + rows) (fewer than max_rows) of panels [p, p + P), one tile.
template <int P, bool Blocked>
PG_TARGET void rest(const args& g, std::size_t i, std::size_t rows, std::size_t p, std::size_t k0, std::size_t kc,
                    bool first, bool last, const __mmask16* mask) {
    switch (rows) {
#define PG_REST(R) \
    case R: tile<R, P, false, Blocked>(g, i, p, k0, kc, first, last, mask, nullptr, 0); break;
        PG_REST(1)
        PG_REST(2)
        PG_REST(3)
        PG_REST(4)
        PG_REST(5)
        PG_REST(6)
        PG_REST(7)
        PG_REST(8)
        PG_REST(9)
        PG_REST(10)
        PG_REST(11)
#undef PG_REST
    default: break;
    }
}

template <int P, bool Blocked>
PG_TARGET void panels_of(const args& g, std::size_t m0, std::size_t m1, std::size_t p, std::size_t p1,
                         std::size_t k0, std::size_t kc, bool first, bool last) {
    __mmask16 mask[P];
    for (int q = 0; q < P; ++q) {
        const std::size_t c = (p + static_cast<std::size_t>(q)) * panel;
        mask[q] = lanes(g.n - c);
    }
    // The pair's first tile prefetches the next pair's block (when there is one).
    const std::size_t np = p + P;
    const float* next = np < p1 ? g.b + (np * g.k + k0) * panel : nullptr;
    const int next_panels = np + 1 < p1 ? 2 : 1;
    std::size_t i = m0;
    if (next && i + max_rows <= m1) {
        tile<max_rows, P, true, Blocked>(g, i, p, k0, kc, first, last, mask, next, next_panels);
        i += max_rows;
    }
    for (; i + max_rows <= m1; i += max_rows)
        tile<max_rows, P, false, Blocked>(g, i, p, k0, kc, first, last, mask, nullptr, 0);
    if (i < m1) rest<P, Blocked>(g, i, m1 - i, p, k0, kc, first, last, mask);
}

template <bool Blocked>
PG_TARGET void part_of(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    for (std::size_t k0 = 0; k0 < g.k; k0 += g.kc) {
        const std::size_t kc = std::min(g.kc, g.k - k0);
        const bool first = k0 == 0, last = k0 + kc == g.k;
        std::size_t p = p0;
        for (; p + 2 <= p1; p += 2) panels_of<2, Blocked>(g, m0, m1, p, p1, k0, kc, first, last);
        if (p < p1) panels_of<1, Blocked>(g, m0, m1, p, p1, k0, kc, first, last);
    }
}

PG_TARGET void part(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    if (g.block != 0) part_of<true>(g, m0, m1, p0, p1);
    else part_of<false>(g, m0, m1, p0, p1);
}

#undef PG_TARGET

}  // namespace

part_fn avx512_part() { return part; }

}  // namespace kiln::cpu::pgemm
