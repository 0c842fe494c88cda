// The int4 GEMM for CPUs with AVX2 and FMA (chosen by cpuid, int4_gemm.cpp). A tile of
// R (1..4) rows x 16 columns lives in 2R ymm accumulators; each k step loads the panel's
// 8 bytes (16 weights) as two broadcast 32-bit halves, shifts each lane to its nibble,
// masks and converts them, then broadcasts A's R values into 2R FMAs with the raw nibbles;
// the block's scale and offset are applied once per block (int4_gemm_args.hpp, asum). The
// weights exist only in registers. unpack() writes float32 weights for the many-row path.
#include "targets/cpu/kernels/int4_gemm/int4_gemm_args.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kiln::cpu::int4g {
namespace {

#define I4_TARGET __attribute__((target("avx2,fma")))

alignas(32) const std::int32_t mask_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

I4_TARGET inline __m256i lanes(std::size_t count) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask_table + 8 - count));
}

// The 16 nibbles of panel row k as floats u (0..15): each 32-bit half broadcast, shifted
// lane by lane to its column's nibble, masked.
I4_TARGET inline void nibbles(const std::uint8_t* row, __m256& u0, __m256& u1) {
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), low = _mm256_set1_epi32(0x0F);
    // vbroadcastss from memory is a load alone; a broadcast from a register would take a
    // shuffle port (GCC makes one of _mm256_set1_epi32 over a scalar load).
    const float* halves = reinterpret_cast<const float*>(row);
    const __m256i h0 = _mm256_castps_si256(_mm256_broadcast_ss(halves));
    const __m256i h1 = _mm256_castps_si256(_mm256_broadcast_ss(halves + 1));
    u0 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(h0, shifts), low));
    u1 = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srlv_epi32(h1, shifts), low));
}

template <int R>
I4_TARGET inline void step(const args& g, const float* a, const std::uint8_t* b, std::size_t k, __m256 (&acc)[R][2]) {
    __m256 u0, u1;
    nibbles(b + k * panel_bytes, u0, u1);
    for (int r = 0; r < R; ++r) {
        const __m256 av = _mm256_broadcast_ss(a + static_cast<std::size_t>(r) * g.k + k);
        acc[r][0] = _mm256_fmadd_ps(av, u0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(av, u1, acc[r][1]);
    }
}

// R rows. Within a block of K the tile sums a u (U sets of accumulators taking turns over
// k, so that one or two rows are not bound by the FMA latency of a single chain); at the
// block's end it adds s times that and offset times the block's sum of a (args::asum).
template <int R, int U>
I4_TARGET void tile(const args& g, std::size_t i, std::size_t p, std::size_t width) {
    const std::size_t nb = blocks(g);
    const float* a = g.a + i * g.k;
    const std::uint8_t* b = g.b + p * g.k * panel_bytes;
    const float* so = g.so + p * nb * 2 * panel;
    __m256 acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (std::size_t kb = 0, blk = 0; kb < g.k; kb += g.block, ++blk) {
        __m256 part[U][R][2];
        for (int u = 0; u < U; ++u)
            for (int r = 0; r < R; ++r) part[u][r][0] = part[u][r][1] = _mm256_setzero_ps();
        const std::size_t kend = std::min(g.k, kb + g.block);
        std::size_t k = kb;
        for (; k + U <= kend; k += U)
            for (int u = 0; u < U; ++u) step<R>(g, a, b, k + static_cast<std::size_t>(u), part[u]);
        for (; k < kend; ++k) step<R>(g, a, b, k, part[0]);
        const float* s = so + blk * 2 * panel;
        const __m256 s0 = _mm256_loadu_ps(s), s1 = _mm256_loadu_ps(s + 8);
        const __m256 o0 = _mm256_loadu_ps(s + 16), o1 = _mm256_loadu_ps(s + 24);
        for (int r = 0; r < R; ++r) {
            for (int u = 1; u < U; ++u) {
                part[0][r][0] = _mm256_add_ps(part[0][r][0], part[u][r][0]);
                part[0][r][1] = _mm256_add_ps(part[0][r][1], part[u][r][1]);
            }
            const __m256 as = _mm256_broadcast_ss(g.asum + (i + static_cast<std::size_t>(r)) * nb + blk);
            acc[r][0] = _mm256_fmadd_ps(as, o0, _mm256_fmadd_ps(part[0][r][0], s0, acc[r][0]));
            acc[r][1] = _mm256_fmadd_ps(as, o1, _mm256_fmadd_ps(part[0][r][1], s1, acc[r][1]));
        }
    }
    const std::size_t col = p * panel;
    for (int r = 0; r < R; ++r) {
        float* c = g.c + (i + static_cast<std::size_t>(r)) * g.n + col;
        if (width == panel) {
            _mm256_storeu_ps(c, acc[r][0]);
            _mm256_storeu_ps(c + 8, acc[r][1]);
        } else {
            _mm256_maskstore_ps(c, lanes(std::min<std::size_t>(width, 8)), acc[r][0]);
            if (width > 8) _mm256_maskstore_ps(c + 8, lanes(width - 8), acc[r][1]);
        }
    }
}

I4_TARGET void unpack(const args& g, std::size_t p, std::size_t k0, std::size_t kc, float* out) {
    const std::size_t nb = blocks(g);
    const std::uint8_t* b = g.b + p * g.k * panel_bytes;
    for (std::size_t k = k0; k < k0 + kc;) {
        const std::size_t blk = k / g.block, kend = std::min(k0 + kc, (blk + 1) * g.block);
        const float* s = g.so + (p * nb + blk) * 2 * panel;
        const __m256 s0 = _mm256_loadu_ps(s), s1 = _mm256_loadu_ps(s + 8);
        const __m256 o0 = _mm256_loadu_ps(s + 16), o1 = _mm256_loadu_ps(s + 24);
        for (; k < kend; ++k) {
            __m256 u0, u1;
            nibbles(b + k * panel_bytes, u0, u1);
            _mm256_storeu_ps(out + (k - k0) * panel, _mm256_fmadd_ps(u0, s0, o0));
            _mm256_storeu_ps(out + (k - k0) * panel + 8, _mm256_fmadd_ps(u1, s1, o1));
        }
    }
}

I4_TARGET void part(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    constexpr std::size_t rows = 4;
    for (std::size_t p = p0; p < p1; ++p) {
        const std::size_t width = std::min(panel, g.n - p * panel);
        std::size_t i = m0;
        for (; i + rows <= m1; i += rows) tile<4, 1>(g, i, p, width);
        switch (m1 - i) {
        case 3: tile<3, 1>(g, i, p, width); break;
        case 2: tile<2, 2>(g, i, p, width); break;
        case 1: tile<1, 4>(g, i, p, width); break;
        default: break;
        }
    }
}

#undef I4_TARGET

}  // namespace

part_fn avx2_part() { return part; }
unpack_fn avx2_unpack() { return unpack; }

}  // namespace kiln::cpu::int4g
