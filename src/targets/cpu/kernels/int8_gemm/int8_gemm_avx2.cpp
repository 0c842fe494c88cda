// The exact int8 GEMM for CPUs with AVX2 (chosen by cpuid, int8_gemm.cpp). Rows are taken
// in blocks of 48: the block's A is widened once into int16 pairs, [rows][k2] 32-bit
// words, which each panel of 16 columns then multiplies in 6 x 16 register tiles (12 ymm
// accumulators): per pair of k one load of the panel's two ymm, and per row a broadcast
// word and two vpmaddwd + vpaddd. The panel (k * 64 bytes) stays in L1/L2 across the
// block's tiles. The requantize runs on the accumulators (requant_avx2.hpp; u8/s8 results of
// f32_exact accumulators in store_exact_rows, the panel's constants loaded once per tile).
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/kernels/int8_gemm/requant_avx2.hpp"

#include <algorithm>
#include <type_traits>
#include <vector>

namespace kiln::cpu::i8g {
namespace {

constexpr std::size_t block_rows = 8 * tile_rows;

// The u8/s8 results of f32_exact accumulators (comp not yet added) for `rows` rows of one
// panel, the panel's constants loaded once for all of them: at small k the requantize is
// most of a tile's work, and store16 per row reloads them. Out of line, so that the tile's
// k loop keeps its registers.
__attribute__((noinline)) I8_AVX2 void store_exact_rows(const gemm_args& g, const __m256i* acc, int rows,
                                                        std::size_t row, std::size_t c, std::size_t width) {
    const exact_consts k = exact_consts_of(g.q);
    const __m256i comp0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q.comp + c));
    const __m256i comp1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.q.comp + c + 8));
    const __m256 qs0 = _mm256_loadu_ps(g.q.qscale + c), qs1 = _mm256_loadu_ps(g.q.qscale + c + 8);
    const __m256 s0 = _mm256_loadu_ps(g.q.scale + c), s1 = _mm256_loadu_ps(g.q.scale + c + 8);
    const bool u8 = g.q.out == out_kind::u8;
    for (int r = 0; r < rows; ++r, acc += 2) {
        const __m256i l0 = exact_offsets8(k, _mm256_add_epi32(acc[0], comp0), qs0, s0);
        const __m256i l1 = exact_offsets8(k, _mm256_add_epi32(acc[1], comp1), qs1, s1);
        // vpackssdw interleaves the lanes' quarters (0-3, 8-11 | 4-7, 12-15): back in order.
        const __m256i w = _mm256_permute4x64_epi64(_mm256_packs_epi32(l0, l1), 0xD8);
        store_levels16(k, u8, static_cast<char*>(g.c) + (row + static_cast<std::size_t>(r)) * g.ldc + c, w, width);
    }
}

template <int R>
I8_AVX2 void tile(const gemm_args& g, const std::int32_t* ap, const std::int16_t* bp, std::size_t k2, std::size_t row,
                  std::size_t p) {
    __m256i acc[R][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (std::size_t kk = 0; kk < k2; ++kk) {
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + kk * 32));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + kk * 32 + 16));
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
            const __m256i av = _mm256_set1_epi32(ap[static_cast<std::size_t>(r) * k2 + kk]);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(av, b0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(av, b1));
        }
    }
    const std::size_t c = p * panel, width = std::min(panel, g.n - c);
    if (g.q.f32_exact && g.q.out != out_kind::f32) {
        // A copy: the accumulators' own address must not escape, or the k loop keeps them
        // in memory.
        alignas(32) std::int32_t out[R][2][8];
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(out[r][0]), acc[r][0]);
            _mm256_store_si256(reinterpret_cast<__m256i*>(out[r][1]), acc[r][1]);
        }
        store_exact_rows(g, reinterpret_cast<const __m256i*>(&out[0][0][0]), R, row, c, width);
        return;
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r)
        store16(g.q, element(g.q, g.c, (row + static_cast<std::size_t>(r)) * g.ldc + c), acc[r][0], acc[r][1], c,
                width);
}

using tile_fn = void (*)(const gemm_args&, const std::int32_t*, const std::int16_t*, std::size_t, std::size_t,
                         std::size_t);
constexpr tile_fn tiles[tile_rows + 1] = {nullptr, tile<1>, tile<2>, tile<3>, tile<4>, tile<5>, tile<6>};

// Rows [i0, i0 + rows) of A as int16 pairs, [tiles][6][k2] 32-bit words: each row widened
// in place of its bytes (16 at a time), the odd k's partner and missing rows 0.
template <class T>
I8_AVX2 void pack_a(const gemm_args& g, const T* a, std::size_t i0, std::size_t rows, std::int32_t* out) {
    const std::size_t k2 = pairs(g.k), nt = (rows + tile_rows - 1) / tile_rows;
    if (rows < nt * tile_rows) std::fill(out + rows * k2, out + nt * tile_rows * k2, 0);
    for (std::size_t r = 0; r < rows; ++r) {
        const T* src = a + (i0 + r) * g.lda;
        std::int32_t* dst = out + r * k2;
        std::size_t kk = 0;
        for (; 2 * kk + 16 <= g.k; kk += 8) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * kk));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + kk),
                                std::is_signed_v<T> ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v));
        }
        for (; kk < k2; ++kk) {
            const auto lo = static_cast<std::uint16_t>(static_cast<std::int16_t>(src[2 * kk]));
            const auto hi =
                2 * kk + 1 < g.k ? static_cast<std::uint16_t>(static_cast<std::int16_t>(src[2 * kk + 1])) : 0;
            dst[kk] =
                static_cast<std::int32_t>(static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16));
        }
    }
}

I8_AVX2 void gemm(const gemm_args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    const std::size_t k2 = pairs(g.k);
    std::vector<std::int32_t> buf(block_rows * k2);
    for (std::size_t i0 = m0; i0 < m1; i0 += block_rows) {
        const std::size_t rows = std::min(block_rows, m1 - i0);
        if (g.a_signed)
            pack_a(g, static_cast<const std::int8_t*>(g.a), i0, rows, buf.data());
        else
            pack_a(g, static_cast<const std::uint8_t*>(g.a), i0, rows, buf.data());
        for (std::size_t p = p0; p < p1; ++p) {
            const std::int16_t* bp = g.b + p * k2 * panel * 2;
            for (std::size_t t = 0; t * tile_rows < rows; ++t) {
                const std::size_t r = std::min(tile_rows, rows - t * tile_rows);
                tiles[r](g, buf.data() + t * k2 * tile_rows, bp, k2, i0 + t * tile_rows, p);
            }
        }
    }
}

}  // namespace

gemm_fn avx2_gemm() { return gemm; }

I8_AVX2 void avx2_store_rows(const gemm_args& g, const std::int32_t* acc, int rows, std::size_t row, std::size_t c,
                             std::size_t width) {
    const auto* v = reinterpret_cast<const __m256i*>(acc);
    if (g.q.f32_exact && g.q.out != out_kind::f32) {
        store_exact_rows(g, v, rows, row, c, width);
        return;
    }
    for (int r = 0; r < rows; ++r)
        store16(g.q, element(g.q, g.c, (row + static_cast<std::size_t>(r)) * g.ldc + c), _mm256_loadu_si256(v + 2 * r),
                _mm256_loadu_si256(v + 2 * r + 1), c, width);
}

}  // namespace kiln::cpu::i8g
