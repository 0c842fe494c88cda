// The exact int8 GEMM for CPUs with AVX-512 VNNI (chosen by cpuid at load, int8_gemm.cpp):
// vpdpbusd multiplies A's four u8 of a quad of k (broadcast as one 32-bit word) by a panel's
// 16 columns x 4 k of s8 weights (one zmm, int8_gemm_args.hpp's b8) and adds the four
// products into each column's int32, without saturation (no 16-bit sums): twice the
// products per instruction of the AVX2 kernel's vpmaddwd, and A is not widened. Register
// tiles of up to 8 rows x 2 panels (16 zmm accumulators); rows are taken in blocks of 64,
// the block's A copied once into 32-bit words (s8 shifted to u8 by xor 0x80: comp has the
// -128 sum w that undoes it; k's last quad padded with zeros, which meet zero weights).
// The requantize of f32_exact accumulators (the common case) runs here on 16 lanes, the
// AVX2 kernel's steps (requant_avx2.hpp's exact_offsets8 and real8) with each product held
// by an empty asm so that GCC cannot fuse it with the subtraction after it (this target has
// FMA; ref rounds twice). The double path is the AVX2 one, out of line (avx2_store_rows).
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
// The AVX-512 intrinsics start from _mm512_undefined_*, which GCC 12's flow analysis reports
// as maybe-uninitialized (as in packed_gemm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define I8_VNNI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))

namespace kiln::cpu::i8g {
namespace {

constexpr std::size_t rows_per_tile = vnni_tile_rows;

// A product GCC must round on its own (no fused multiply-add with what follows).
I8_VNNI inline __m512 rounded(__m512 v) {
    asm("" : "+v"(v));
    return v;
}

// exact_offsets8's levels (requant_avx2.hpp) for 16 channels, y_zero added: t = float(acc) *
// fl(scale / y_scale) rounds as ref's quotient unless t is within 2^-10 of a half-integer;
// then ref's division for the vector.
struct exact16 {
    __m512 qscale, scale, y_scale, near_half, lo, hi;
    __m512i comp, y_zero;
};

I8_VNNI inline exact16 exact16_of(const requant& q, std::size_t c) {
    exact16 k;
    k.qscale = _mm512_loadu_ps(q.qscale + c);
    k.scale = _mm512_loadu_ps(q.scale + c);
    k.y_scale = _mm512_set1_ps(q.y_scale);
    k.near_half = _mm512_set1_ps(0.5f - 1.0f / 1024.0f);
    k.lo = _mm512_set1_ps(q.y_min - q.y_zero);
    k.hi = _mm512_set1_ps(q.y_max - q.y_zero);
    k.comp = _mm512_loadu_si512(q.comp + c);
    k.y_zero = _mm512_set1_epi32(static_cast<std::int32_t>(q.y_zero));
    return k;
}

I8_VNNI inline __m512i exact_levels16(const exact16& k, __m512i acc) {
    const __m512 af = _mm512_cvtepi32_ps(_mm512_add_epi32(acc, k.comp));
    const __m512 t = rounded(_mm512_mul_ps(af, k.qscale));
    __m512 r = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 gap = _mm512_abs_ps(_mm512_sub_ps(t, r));
    if (_mm512_cmp_ps_mask(gap, k.near_half, _CMP_GE_OQ) != 0)
        r = _mm512_roundscale_ps(_mm512_div_ps(rounded(_mm512_mul_ps(af, k.scale)), k.y_scale),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_min_ps(_mm512_max_ps(r, k.lo), k.hi);
    return _mm512_add_epi32(_mm512_cvtps_epi32(r), k.y_zero);
}

// The rows of one panel: float32 values or u8/s8 levels of f32_exact accumulators here,
// anything else through the AVX2 requantize.
template <int R, int P>
__attribute__((always_inline)) I8_VNNI inline void store_panel(const gemm_args& g, __m512i (&acc)[R][P], int j,
                                                               std::size_t row, std::size_t c) {
    const std::size_t width = std::min(panel, g.n - c);
    const __mmask16 m = width == panel ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << width) - 1);
    if (g.q.f32_exact && g.q.out == out_kind::f32) {
        const __m512i comp = _mm512_loadu_si512(g.q.comp + c);
        const __m512 scale = _mm512_loadu_ps(g.q.scale + c);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
            _mm512_mask_storeu_ps(static_cast<float*>(g.c) + (row + static_cast<std::size_t>(r)) * g.ldc + c, m,
                                  _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(acc[r][j], comp)), scale));
        return;
    }
    if (g.q.f32_exact) {
        const exact16 k = exact16_of(g.q, c);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)  // levels within the 8-bit range: the low byte is the value
            _mm512_mask_cvtepi32_storeu_epi8(static_cast<char*>(g.c) + (row + static_cast<std::size_t>(r)) * g.ldc + c,
                                             m, exact_levels16(k, acc[r][j]));
        return;
    }
    alignas(64) std::int32_t out[R][panel];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_store_si512(out[r], acc[r][j]);
    avx2_store_rows(g, &out[0][0], R, row, c, width);
}
constexpr std::size_t block_rows = 8 * rows_per_tile;

// acc += the four u8 of a times the four s8 of w, per 32-bit lane, in place. With the
// intrinsic (and the panel loops below not unrolled) GCC 12 wrote the sums to other
// registers and copied them back: 26 moves and a spill per 16 vpdpbusd in the 8 x 2 tile's
// loop; now the loop is the loads, broadcasts and vpdpbusd (bert_small_qdq 2-3% faster).
I8_VNNI inline void dpbusd(__m512i& acc, __m512i a, __m512i w) {
    asm("vpdpbusd %[w], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [w] "v"(w));
}

template <int R, int P>
I8_VNNI void tile(const gemm_args& g, const std::int32_t* ap, const std::int8_t* bp, std::size_t k4,
                  std::size_t row, std::size_t p) {
    __m512i acc[R][P];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 2
        for (int j = 0; j < P; ++j) acc[r][j] = _mm512_setzero_si512();
    const std::size_t panel_bytes = k4 * panel * 4;
    for (std::size_t q = 0; q < k4; ++q) {
        __m512i b[P];
#pragma GCC unroll 2
        for (int j = 0; j < P; ++j) b[j] = _mm512_loadu_si512(bp + j * panel_bytes + q * panel * 4);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
            const __m512i av = _mm512_set1_epi32(ap[static_cast<std::size_t>(r) * k4 + q]);
#pragma GCC unroll 2
            for (int j = 0; j < P; ++j) dpbusd(acc[r][j], av, b[j]);
        }
    }
#pragma GCC unroll 2
    for (int j = 0; j < P; ++j) store_panel<R, P>(g, acc, j, row, (p + static_cast<std::size_t>(j)) * panel);
}

using tile_fn = void (*)(const gemm_args&, const std::int32_t*, const std::int8_t*, std::size_t, std::size_t,
                         std::size_t);
constexpr tile_fn tiles[2][rows_per_tile + 1] = {
    {nullptr, tile<1, 1>, tile<2, 1>, tile<3, 1>, tile<4, 1>, tile<5, 1>, tile<6, 1>, tile<7, 1>, tile<8, 1>},
    {nullptr, tile<1, 2>, tile<2, 2>, tile<3, 2>, tile<4, 2>, tile<5, 2>, tile<6, 2>, tile<7, 2>, tile<8, 2>}};

// Rows [i0, i0 + rows) of A as [rows][k4] 32-bit words of four u8 (s8 xor 0x80).
I8_VNNI void pack_a(const gemm_args& g, std::size_t i0, std::size_t rows, std::int32_t* out) {
    const std::size_t k4 = quads(g.k), whole = g.k / 64 * 64;
    const __m512i flip = _mm512_set1_epi8(g.a_signed ? static_cast<char>(0x80) : 0);
    for (std::size_t r = 0; r < rows; ++r) {
        const auto* src = static_cast<const std::uint8_t*>(g.a) + (i0 + r) * g.lda;
        auto* dst = reinterpret_cast<std::uint8_t*>(out + r * k4);
        for (std::size_t kk = 0; kk < whole; kk += 64)
            _mm512_storeu_si512(dst + kk, _mm512_xor_si512(_mm512_loadu_si512(src + kk), flip));
        const std::size_t rest = g.k - whole, tail = k4 * 4 - whole;  // the tail and its padding
        if (tail) {
            const __mmask64 in = rest == 64 ? ~__mmask64{0} : (__mmask64{1} << rest) - 1;
            const __mmask64 all = tail == 64 ? ~__mmask64{0} : (__mmask64{1} << tail) - 1;
            const __m512i v = _mm512_xor_si512(_mm512_maskz_loadu_epi8(in, src + whole), flip);
            _mm512_mask_storeu_epi8(dst + whole, all, _mm512_maskz_mov_epi8(in, v));
        }
    }
}

I8_VNNI void gemm(const gemm_args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    const std::size_t k4 = quads(g.k);
    std::vector<std::int32_t> buf(block_rows * k4);
    for (std::size_t i0 = m0; i0 < m1; i0 += block_rows) {
        const std::size_t rows = std::min(block_rows, m1 - i0);
        pack_a(g, i0, rows, buf.data());
        for (std::size_t p = p0; p < p1; p += 2) {
            const int np = p + 1 < p1 ? 2 : 1;
            const std::int8_t* bp = g.b8 + p * k4 * panel * 4;
            for (std::size_t t = 0; t * rows_per_tile < rows; ++t) {
                const std::size_t r = std::min(rows_per_tile, rows - t * rows_per_tile);
                tiles[np - 1][r](g, buf.data() + t * rows_per_tile * k4, bp, k4, i0 + t * rows_per_tile, p);
            }
        }
    }
}

}  // namespace

gemm_fn vnni_gemm() { return gemm; }

}  // namespace kiln::cpu::i8g
