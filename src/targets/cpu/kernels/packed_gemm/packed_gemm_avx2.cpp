// The packed GEMM's micro-kernels for CPUs with AVX2 and FMA, chosen at load time
// (packed_gemm.cpp): only these functions carry the target attribute, so the rest of
// the build stays at the baseline ISA.
//
// A 6 x 16 tile of C lives in 12 ymm accumulators; each k step loads one row of the
// packed B panel (two vectors) and broadcasts one element of each of the 6 rows of A,
// read in place. The tile is stored as partial sums between k blocks; the bias and the
// post-ops are applied to the registers after the last block.
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

// 32-byte vectors are passed between inlined helpers of this file only: the ABI note
// about them (a GCC warning) does not concern any call that crosses the file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kiln::cpu::pgemm {
namespace {

#define PG_TARGET __attribute__((target("avx2,fma")))

alignas(32) const std::int32_t mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

// The first `count` (0..8) lanes.
PG_TARGET inline __m256i lanes(std::size_t count) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask_table + 8 - count));
}

struct cols {
    bool full;
    __m256i m0, m1;  // lanes 0-7 and 8-15 of a partial panel
};

// p: the half's own first element (the halves of a tile need not be adjacent).
PG_TARGET inline __m256 load(const float* p, const cols& c, int half) {
    if (c.full) return _mm256_loadu_ps(p);
    return _mm256_maskload_ps(p, half ? c.m1 : c.m0);
}

PG_TARGET inline void store(float* p, __m256 v, const cols& c, int half) {
    if (c.full) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, half ? c.m1 : c.m0, v);
}

// gelu_erf_scalar (fused_post_kind.hpp), eight lanes.
PG_TARGET inline __m256 gelu8(__m256 v) {
    using namespace gelu_coef;
    const __m256 x = _mm256_mul_ps(v, _mm256_set1_ps(inv_sqrt2));
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256 a = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), x2 = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(gelu_coef::p[0]);
    for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, x2, _mm256_set1_ps(gelu_coef::p[i]));
    // min returns its second operand when either is NaN: a NaN stays NaN.
    const __m256 t = _mm256_sub_ps(_mm256_min_ps(_mm256_set1_ps(big_cap), a), _mm256_set1_ps(big_center));
    __m256 q = _mm256_set1_ps(gelu_coef::q[0]);
    for (int i = 1; i < 13; ++i) q = _mm256_fmadd_ps(q, t, _mm256_set1_ps(gelu_coef::q[i]));
    q = _mm256_min_ps(_mm256_set1_ps(1.0f), q);
    const __m256 big = _mm256_or_ps(q, sign);
    const __m256 erf = _mm256_blendv_ps(big, _mm256_mul_ps(x, p), _mm256_cmp_ps(a, _mm256_set1_ps(small_cut), _CMP_LT_OQ));
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), v), _mm256_add_ps(_mm256_set1_ps(1.0f), erf));
}

PG_TARGET inline __m256 apply(const post_step& s, __m256 v, const float* src, const cols& c, int half) {
    switch (s.kind) {
    case post_kind::linear: return _mm256_fmadd_ps(_mm256_set1_ps(s.alpha), v, _mm256_set1_ps(s.beta));
    case post_kind::relu:
        if (s.alpha == 0.0f) return _mm256_max_ps(v, _mm256_setzero_ps());
        return _mm256_blendv_ps(_mm256_mul_ps(v, _mm256_set1_ps(s.alpha)), v,
                                _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_GT_OQ));
    case post_kind::clip:
        return _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(s.alpha)), _mm256_set1_ps(s.beta));
    case post_kind::gelu_erf: return gelu8(v);
    case post_kind::hardswish: {
        const __m256 g = _mm256_fmadd_ps(v, _mm256_set1_ps(1.0f / 6.0f), _mm256_set1_ps(0.5f));
        return _mm256_mul_ps(v, _mm256_min_ps(_mm256_max_ps(g, _mm256_setzero_ps()), _mm256_set1_ps(1.0f)));
    }
    case post_kind::add: return _mm256_add_ps(v, load(src, c, half));
    case post_kind::sub: return _mm256_sub_ps(v, load(src, c, half));
    case post_kind::mul: return _mm256_mul_ps(v, load(src, c, half));
    case post_kind::max: return _mm256_max_ps(v, load(src, c, half));
    case post_kind::min: return _mm256_min_ps(v, load(src, c, half));
    }
    return v;
}

// One R x 16 tile: rows [i, i + R) of C, columns [16 p, 16 p + width), k in [k0, k0 + kc).
// Each row and each half of the tile (8 columns) has its own base: C may be channel-blocked.
// With Ahead, the tile prefetches `ahead`, one B row (one cache line) per k step: a panel's
// first tile fetches the next panel's block (B streams from memory once; without this the
// first tile of every panel waits for it).
template <int R, bool Ahead, bool Blocked>
PG_TARGET void tile(const args& g, std::size_t i, std::size_t p, std::size_t k0, std::size_t kc, bool first,
                    bool last, const cols& c, const float* ahead) {
    const std::size_t lda = a_stride(g), ldc = g.ldc ? g.ldc : g.n;
    const float* a = g.a + i * lda + k0;
    const float* b = g.b + (p * g.k + k0) * panel;
    const std::size_t col = p * panel;
    // Row-major C (Blocked false) keeps the plain strides, which the compiler folds.
    const std::size_t half_at[2] = {Blocked ? col_offset(g, col) : col, Blocked ? col_offset(g, col + 8) : col + 8};
    std::size_t row_at[R];
    for (int r = 0; r < R; ++r)
        row_at[r] = Blocked ? row_offset(g, i + static_cast<std::size_t>(r)) : (i + static_cast<std::size_t>(r)) * ldc;
    __m256 acc[R][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
        acc[r][0] = first ? _mm256_setzero_ps() : load(g.c + row_at[r] + half_at[0], c, 0);
        acc[r][1] = first ? _mm256_setzero_ps() : load(g.c + row_at[r] + half_at[1], c, 1);
    }
#pragma GCC unroll 4
    for (std::size_t k = 0; k < kc; ++k) {
        if constexpr (Ahead) _mm_prefetch(reinterpret_cast<const char*>(ahead + k * panel), _MM_HINT_T1);
        const __m256 b0 = _mm256_loadu_ps(b + k * panel);
        const __m256 b1 = _mm256_loadu_ps(b + k * panel + 8);
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
            const __m256 av = _mm256_broadcast_ss(a + r * lda + k);
            acc[r][0] = _mm256_fmadd_ps(av, b0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(av, b1, acc[r][1]);
        }
    }
    if (last) {
        if (g.bias) {
            const __m256 b0 = load(g.bias + col, c, 0), b1 = load(g.bias + col + 8, c, 1);
#pragma GCC unroll 6
            for (int r = 0; r < R; ++r) {
                acc[r][0] = _mm256_add_ps(acc[r][0], b0);
                acc[r][1] = _mm256_add_ps(acc[r][1], b1);
            }
        }
        for (int s = 0; s < g.n_post; ++s) {
            const post_step& st = g.post[s];
#pragma GCC unroll 6
            for (int r = 0; r < R; ++r) {
                const float* s0 = nullptr;
                const float* s1 = nullptr;
                if (st.src && st.full) {
                    s0 = st.src + row_at[r] + half_at[0];
                    s1 = st.src + row_at[r] + half_at[1];
                } else if (st.src) {
                    s0 = st.src + col;
                    s1 = st.src + col + 8;
                }
                acc[r][0] = apply(st, acc[r][0], s0, c, 0);
                acc[r][1] = apply(st, acc[r][1], s1, c, 1);
            }
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
        store(g.c + row_at[r] + half_at[0], acc[r][0], c, 0);
        store(g.c + row_at[r] + half_at[1], acc[r][1], c, 1);
    }
}

template <bool Blocked>
PG_TARGET void part_of(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    for (std::size_t k0 = 0; k0 < g.k; k0 += g.kc) {
        const std::size_t kc = std::min(g.kc, g.k - k0);
        const bool first = k0 == 0 && !g.accumulate, last = k0 + kc == g.k;
        for (std::size_t p = p0; p < p1; ++p) {
            const std::size_t width = std::min(panel, g.n - p * panel);
            cols c{width == panel, lanes(std::min<std::size_t>(width, 8)), lanes(width > 8 ? width - 8 : 0)};
            // The panel's first tile prefetches the next panel's block (when there is one).
            const float* next = p + 1 < p1 ? g.b + ((p + 1) * g.k + k0) * panel : nullptr;  // (to L2)
            std::size_t i = m0;
            if (next && i + tile_rows <= m1) {
                tile<6, true, Blocked>(g, i, p, k0, kc, first, last, c, next);
                i += tile_rows;
                next = nullptr;
            }
            for (; i + tile_rows <= m1; i += tile_rows) tile<6, false, Blocked>(g, i, p, k0, kc, first, last, c, nullptr);
            switch (m1 - i) {
            case 5: tile<5, false, Blocked>(g, i, p, k0, kc, first, last, c, nullptr); break;
            case 4: tile<4, false, Blocked>(g, i, p, k0, kc, first, last, c, nullptr); break;
            case 3: tile<3, false, Blocked>(g, i, p, k0, kc, first, last, c, nullptr); break;
            case 2: tile<2, false, Blocked>(g, i, p, k0, kc, first, last, c, nullptr); break;
            case 1: tile<1, false, Blocked>(g, i, p, k0, kc, first, last, c, nullptr); break;
            default: break;
            }
        }
    }
}

PG_TARGET void part(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    if (g.block != 0) part_of<true>(g, m0, m1, p0, p1);
    else part_of<false>(g, m0, m1, p0, p1);
}

#undef PG_TARGET

}  // namespace

part_fn avx2_part() { return part; }

}  // namespace kiln::cpu::pgemm
