// The int4 GEMM for CPUs with AVX-512 (chosen by cpuid, int4_gemm.cpp): as the AVX2
// kernel (int4_gemm_avx2.cpp), with a panel's 16 columns in one zmm and tiles of up to 8
// rows.
#include "targets/cpu/kernels/int4_gemm/int4_gemm_args.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as an unused merge source, which its
// own flow analysis then reports as maybe-uninitialized (as in packed_gemm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::cpu::int4g {
namespace {

#define I4_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))

// The 16 nibbles of panel row k as floats u in one vector: the row's first 32 bits in lanes
// 0-7 and its next 32 in lanes 8-15 (one permute), each lane shifted to its nibble, masked.
I4_TARGET inline __m512 nibbles(const std::uint8_t* row) {
    const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
    const __m128i x = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row));
    const __m512i v = _mm512_permutexvar_epi32(halves, _mm512_castsi128_si512(x));
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(v, shifts), _mm512_set1_epi32(0x0F)));
}

template <int R>
I4_TARGET inline void step(const args& g, const float* a, const std::uint8_t* b, std::size_t k, __m512 (&acc)[R]) {
    const __m512 u = nibbles(b + k * panel_bytes);
    for (int r = 0; r < R; ++r)
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[static_cast<std::size_t>(r) * g.k + k]), u, acc[r]);
}

// R rows; per block a u summed in U sets of accumulators, then s and offset times the
// block's sum of a applied (as the AVX2 kernel).
template <int R, int U>
I4_TARGET void tile(const args& g, std::size_t i, std::size_t p, std::size_t width) {
    const std::size_t nb = blocks(g);
    const float* a = g.a + i * g.k;
    const std::uint8_t* b = g.b + p * g.k * panel_bytes;
    const float* so = g.so + p * nb * 2 * panel;
    __m512 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (std::size_t kb = 0, blk = 0; kb < g.k; kb += g.block, ++blk) {
        __m512 part[U][R];
        for (int u = 0; u < U; ++u)
            for (int r = 0; r < R; ++r) part[u][r] = _mm512_setzero_ps();
        const std::size_t kend = std::min(g.k, kb + g.block);
        std::size_t k = kb;
        for (; k + U <= kend; k += U)
            for (int u = 0; u < U; ++u) step<R>(g, a, b, k + static_cast<std::size_t>(u), part[u]);
        for (; k < kend; ++k) step<R>(g, a, b, k, part[0]);
        const __m512 sv = _mm512_loadu_ps(so + blk * 2 * panel), ov = _mm512_loadu_ps(so + blk * 2 * panel + 16);
        for (int r = 0; r < R; ++r) {
            for (int u = 1; u < U; ++u) part[0][r] = _mm512_add_ps(part[0][r], part[u][r]);
            const __m512 as = _mm512_set1_ps(g.asum[(i + static_cast<std::size_t>(r)) * nb + blk]);
            acc[r] = _mm512_fmadd_ps(as, ov, _mm512_fmadd_ps(part[0][r], sv, acc[r]));
        }
    }
    const auto mask = static_cast<__mmask16>((1u << width) - 1u);
    for (int r = 0; r < R; ++r)
        _mm512_mask_storeu_ps(g.c + (i + static_cast<std::size_t>(r)) * g.n + p * panel, mask, acc[r]);
}

I4_TARGET void unpack(const args& g, std::size_t p, std::size_t k0, std::size_t kc, float* out) {
    const std::size_t nb = blocks(g);
    const std::uint8_t* b = g.b + p * g.k * panel_bytes;
    for (std::size_t k = k0; k < k0 + kc;) {
        const std::size_t blk = k / g.block, kend = std::min(k0 + kc, (blk + 1) * g.block);
        const float* s = g.so + (p * nb + blk) * 2 * panel;
        const __m512 sv = _mm512_loadu_ps(s), ov = _mm512_loadu_ps(s + 16);
        for (; k < kend; ++k) _mm512_storeu_ps(out + (k - k0) * panel, _mm512_fmadd_ps(nibbles(b + k * panel_bytes), sv, ov));
    }
}

I4_TARGET void part(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    constexpr std::size_t rows = 8;
    for (std::size_t p = p0; p < p1; ++p) {
        const std::size_t width = std::min(panel, g.n - p * panel);
        std::size_t i = m0;
        for (; i + rows <= m1; i += rows) tile<8, 1>(g, i, p, width);
        switch (m1 - i) {
        case 7: tile<7, 1>(g, i, p, width); break;
        case 6: tile<6, 1>(g, i, p, width); break;
        case 5: tile<5, 1>(g, i, p, width); break;
        case 4: tile<4, 1>(g, i, p, width); break;
        case 3: tile<3, 2>(g, i, p, width); break;
        case 2: tile<2, 2>(g, i, p, width); break;
        case 1: tile<1, 4>(g, i, p, width); break;
        default: break;
        }
    }
}

#undef I4_TARGET

}  // namespace

part_fn avx512_part() { return part; }
unpack_fn avx512_unpack() { return unpack; }

}  // namespace kiln::cpu::int4g
