// The packed GEMM's micro-kernels for CPUs with AVX-512 (F, DQ, VL, BW), chosen at load
// time (packed_gemm.cpp): only these functions carry the target attribute, so the rest of
// the build stays at the baseline ISA.
//
// A 16-column panel of B is one zmm row. A tile covers two panels (32 columns) and up to
// 12 rows: 24 zmm accumulators, two B vectors and one broadcast of A per k step, so that
// the loads (13 per 24 FMAs) keep up with two FMA pipes. The last panel of a part, when
// the part has an odd number, runs as a one-panel tile. Partial panels use lane masks;
// channel-blocked C with 8-channel blocks stores each panel as two 8-lane halves.
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"

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

#define PG_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma,prfchw")))

constexpr int max_rows = 12;
constexpr std::size_t max_depth_block = 1024;  // the panel order's k block (part_of)

// The lanes of a panel that exist (its columns below n).
PG_TARGET inline __mmask16 lanes(std::size_t width) {
    return width >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << width) - 1u);
}

// 16 values of one row of one panel: lanes 0-7 at p, lanes 8-15 at p + half1 (8 unless C
// is blocked by 8 channels, where the panel's second half is in the next channel block).
PG_TARGET inline __m512 load16(const float* p, std::size_t half1, __mmask16 m) {
    if (half1 == 8) return m == 0xFFFF ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
    const __m256 lo = _mm256_maskz_loadu_ps(static_cast<__mmask8>(m), p);
    const __m256 hi = _mm256_maskz_loadu_ps(static_cast<__mmask8>(m >> 8), p + half1);
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

PG_TARGET inline void store16(float* p, std::size_t half1, __mmask16 m, __m512 v) {
    if (half1 == 8) {
        if (m == 0xFFFF) _mm512_storeu_ps(p, v);
        else _mm512_mask_storeu_ps(p, m, v);
        return;
    }
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>(m), _mm512_castps512_ps256(v));
    _mm256_mask_storeu_ps(p + half1, static_cast<__mmask8>(m >> 8), _mm512_extractf32x8_ps(v, 1));
}

// gelu_erf_scalar (fused_post_kind.hpp), sixteen lanes.
PG_TARGET inline __m512 gelu16(__m512 v) {
    using namespace gelu_coef;
    const __m512 x = _mm512_mul_ps(v, _mm512_set1_ps(inv_sqrt2));
    const __m512 a = _mm512_abs_ps(x), x2 = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(gelu_coef::p[0]);
    for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, x2, _mm512_set1_ps(gelu_coef::p[i]));
    // min returns its second operand when either is NaN: a NaN stays NaN.
    const __m512 t = _mm512_sub_ps(_mm512_min_ps(_mm512_set1_ps(big_cap), a), _mm512_set1_ps(big_center));
    __m512 q = _mm512_set1_ps(gelu_coef::q[0]);
    for (int i = 1; i < 13; ++i) q = _mm512_fmadd_ps(q, t, _mm512_set1_ps(gelu_coef::q[i]));
    q = _mm512_min_ps(_mm512_set1_ps(1.0f), q);
    const __m512 big = _mm512_castsi512_ps(_mm512_or_si512(
        _mm512_castps_si512(q), _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))));
    const __m512 erf = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(small_cut), _CMP_LT_OQ), big,
                                            _mm512_mul_ps(x, p));
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), _mm512_add_ps(_mm512_set1_ps(1.0f), erf));
}

// What a tile prefetches while it computes (at `ahead`): nothing; next_b, one B row (a
// cache line) per panel per k step of the next panels' block (the first tile of each
// panel pair: B streams from memory once, and without this the first tile of every pair
// waits for it); next_a, the next row tile's rows of A, a line per row every 16 k steps
// (the tall order: A streams from memory once).
enum ahead_kind : int { none, next_b, next_a };

// One R x (16 P) tile: rows [i, i + R) of C, panels [p, p + P), k in [k0, k0 + kc).
template <int R, int P, int Ahead, bool Blocked>
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
        if constexpr (Ahead == next_a) {
            if ((k & 15) == 0)
                for (int r = 0; r < R; ++r)
                    _mm_prefetch(reinterpret_cast<const char*>(ahead + static_cast<std::size_t>(r) * lda + k), _MM_HINT_T0);
        }
        if constexpr (Ahead == next_b) {
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
        // Each step's kind chosen once for the whole tile, every loop inside unrolled, so
        // that the accumulators stay in registers (a per-value switch spills them).
        for (int s = 0; s < g.n_post; ++s) {
            const post_step& st = g.post[s];
#define PG_EACH(expr)                         \
    _Pragma("GCC unroll 12") for (int r = 0; r < R; ++r) \
        _Pragma("GCC unroll 2") for (int q = 0; q < P; ++q) { __m512& v = acc[r][q]; expr; }
#define PG_OPERAND                                                                                     \
    (st.full ? load16(st.src + row_at[r] + at[q], half1[q], mask[q]) \
             : _mm512_maskz_loadu_ps(mask[q], st.src + col[q]))
            switch (st.kind) {
            case post_kind::linear: {
                const __m512 al = _mm512_set1_ps(st.alpha), be = _mm512_set1_ps(st.beta);
                PG_EACH(v = _mm512_fmadd_ps(al, v, be))
                break;
            }
            case post_kind::relu:
                if (st.alpha == 0.0f) {
                    const __m512 zero = _mm512_setzero_ps();
                    PG_EACH(v = _mm512_max_ps(v, zero))
                } else {
                    const __m512 al = _mm512_set1_ps(st.alpha), zero = _mm512_setzero_ps();
                    PG_EACH(v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_GT_OQ), _mm512_mul_ps(v, al), v))
                }
                break;
            case post_kind::clip: {
                const __m512 lo = _mm512_set1_ps(st.alpha), hi = _mm512_set1_ps(st.beta);
                PG_EACH(v = _mm512_min_ps(_mm512_max_ps(v, lo), hi))
                break;
            }
            case post_kind::gelu_erf: PG_EACH(v = gelu16(v)) break;
            case post_kind::add: PG_EACH(v = _mm512_add_ps(v, PG_OPERAND)) break;
            case post_kind::sub: PG_EACH(v = _mm512_sub_ps(v, PG_OPERAND)) break;
            case post_kind::mul: PG_EACH(v = _mm512_mul_ps(v, PG_OPERAND)) break;
            case post_kind::max: PG_EACH(v = _mm512_max_ps(v, PG_OPERAND)) break;
            case post_kind::min: PG_EACH(v = _mm512_min_ps(v, PG_OPERAND)) break;
            }
#undef PG_OPERAND
#undef PG_EACH
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
    case R: tile<R, P, none, Blocked>(g, i, p, k0, kc, first, last, mask, nullptr, 0); break;
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
        tile<max_rows, P, next_b, Blocked>(g, i, p, k0, kc, first, last, mask, next, next_panels);
        i += max_rows;
    }
    for (; i + max_rows <= m1; i += max_rows)
        tile<max_rows, P, none, Blocked>(g, i, p, k0, kc, first, last, mask, nullptr, 0);
    if (i < m1) rest<P, Blocked>(g, i, m1 - i, p, k0, kc, first, last, mask);
}

// Panels [p, p + P) of rows [i, i + rows), k in [k0, k0 + kc) (the tall order). The
// first k block fetches the next tile's lines of C for these panels (for writing, and
// reading when accumulating: without this each store waits for its line from memory);
// with fetch_a, the next tile's rows of A for this k block.
template <int P, bool Blocked>
PG_TARGET void tall_tile(const args& g, std::size_t i, std::size_t rows, std::size_t p, std::size_t k0, std::size_t kc,
                         std::size_t next_rows, bool fetch_a) {
    if (k0 == 0)
        for (std::size_t r = 0; r < next_rows; ++r)
            for (int q = 0; q < P; ++q) {
                const std::size_t col = (p + static_cast<std::size_t>(q)) * panel;
                const std::size_t at = Blocked ? row_offset(g, i + max_rows + r) + col_offset(g, col)
                                               : (i + max_rows + r) * (g.ldc ? g.ldc : g.n) + col;
                __builtin_prefetch(g.c + at, 1, 3);
            }
    __mmask16 mask[P];
    for (int q = 0; q < P; ++q) mask[q] = lanes(g.n - (p + static_cast<std::size_t>(q)) * panel);
    const bool first = k0 == 0 && !g.accumulate, last = k0 + kc == g.k;
    if (rows == max_rows && next_rows == max_rows && fetch_a)
        tile<max_rows, P, next_a, Blocked>(g, i, p, k0, kc, first, last, mask, g.a + (i + max_rows) * a_stride(g) + k0, 0);
    else if (rows == max_rows) tile<max_rows, P, none, Blocked>(g, i, p, k0, kc, first, last, mask, nullptr, 0);
    else rest<P, Blocked>(g, i, rows, p, k0, kc, first, last, mask);
}

// Budget, in bytes, for the block of B (all of K, some panels) the tall order keeps in L2
// while the row tiles sweep it: half of the smallest L2 among AVX-512 CPUs (1 MiB).
constexpr std::size_t tall_b_bytes = 512 * 1024;

// The tall order: panels in blocks whose B fits tall_b_bytes; within a block, row tile by
// row tile, each tile finished (all k blocks of all the block's panels) before the next:
// a tile's rows of A for one k block stay in L1 across the panels, its partial C in L1
// across the k blocks, and A and C stream through memory once per block of panels, the
// next tile's lines fetched while this one computes.
template <bool Blocked>
PG_TARGET void tall_part_of(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    const std::size_t per_panel = g.k * panel * sizeof(float);
    const std::size_t block = std::max<std::size_t>(2, tall_b_bytes / per_panel / 2 * 2);
    for (std::size_t pb = p0; pb < p1; pb += block) {
        const std::size_t pe = std::min(pb + block, p1);
        for (std::size_t i = m0; i < m1; i += max_rows) {
            const std::size_t rows = std::min<std::size_t>(max_rows, m1 - i);
            const std::size_t next_rows = i + max_rows < m1 ? std::min<std::size_t>(max_rows, m1 - i - max_rows) : 0;
            for (std::size_t k0 = 0; k0 < g.k; k0 += g.kc) {
                const std::size_t kc = std::min(g.kc, g.k - k0);
                std::size_t p = pb;
                for (; p + 2 <= pe; p += 2) tall_tile<2, Blocked>(g, i, rows, p, k0, kc, next_rows, p == pb);
                if (p < pe) tall_tile<1, Blocked>(g, i, rows, p, k0, kc, next_rows, p == pb);
            }
        }
    }
}

template <bool Blocked>
PG_TARGET void part_of(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    if (g.tall) {
        tall_part_of<Blocked>(g, m0, m1, p0, p1);
        return;
    }
    // K in blocks of up to 1024 rather than g.kc (sized for the AVX2 kernels' one-panel B in
    // L1): the pair's B micro-panel comes from L2 (1 MiB and more on AVX-512 CPUs) as fast,
    // and C is loaded and stored fewer times (128x1024x256: 441 vs 421 GFLOP/s; 197x768x192:
    // 400-404 vs 364-366, alternating in one process; bert_small 2.42-2.69 vs 2.44-2.59 ms,
    // vit_tiny 3.70-3.94 vs 3.78-3.81, 4 alternating runs).
    const std::size_t blocks = (g.k + max_depth_block - 1) / max_depth_block;
    const std::size_t kb = (g.k + blocks - 1) / blocks;
    for (std::size_t k0 = 0; k0 < g.k; k0 += kb) {
        const std::size_t kc = std::min(kb, g.k - k0);
        const bool first = k0 == 0 && !g.accumulate, last = k0 + kc == g.k;
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
