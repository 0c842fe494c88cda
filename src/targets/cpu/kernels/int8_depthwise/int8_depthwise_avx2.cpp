// The exact depthwise 3x3 int8 convolution for CPUs with AVX2 (chosen by cpuid,
// int8_depthwise.cpp): channels-last, one output row and 16 channels at a time.
//
// The taps are paired vertically, (row 0, row 1) and (row 2, 0) of each window column, so
// one input column's pairs serve every output pixel whose window holds that column (three
// with stride 1): for an output row and a channel block, each input column is widened to
// int16 once and stored interleaved in a small scratch row (4 ymm per column; the zero
// point outside the image). An output pixel is then 12 vpmaddwd of scratch columns by 12
// weight vectors built once per block (from the packed tap pairs (0,1), (2,3), ... of
// int8_gemm_args.hpp with a few blends and shifts), summed onto -z sum w (and comp): the
// same integer as ref's sum of (x - z) w over the taps inside the image. |x| <= 255 and
// |w| <= 128: every product and pair sum is exact in int32, nothing saturates.
//
// u8/s8 results of f32_exact accumulators are requantized in the pixel loop itself
// (requant_avx2.hpp's exact_offsets8: exact_levels8 with its constants in registers, the
// lanes kept in vpunpck order, so no permute); the others go through store16.
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/kernels/int8_gemm/requant_avx2.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::cpu::i8g {
namespace {

template <bool Signed>
I8_AVX2 inline __m256i widen16(const std::uint8_t* p, std::size_t width) {
    __m128i v;
    if (width == 16)
        v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    else {
        alignas(16) std::uint8_t tmp[16] = {};
        std::memcpy(tmp, p, width);
        v = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
    }
    return Signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

I8_AVX2 inline __m256i ld(const std::int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
I8_AVX2 inline void st(std::int16_t* p, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }

// A column's 4 vectors in the scratch: (row 0, row 1) lo and hi, (row 2, 0) lo and hi; lo
// holds channels 0-3 and 8-11 of the block, hi 4-7 and 12-15 (the vpunpck order, which the
// packed weights share: dw_weight_index).
constexpr std::size_t col_elems = 64;

// The 12 weight vectors of one block: per window column kx, the pairs (kx, 3 + kx) and
// (6 + kx, 0), lo and hi.
struct block_weights {
    __m256i top[3][2], bottom[3][2];
};

I8_AVX2 inline block_weights weights_of(const dw_args& d, std::size_t cp, std::size_t c0) {
    block_weights b;
    const __m256i low16 = _mm256_set1_epi32(0xFFFF);
    for (std::size_t h = 0; h < 2; ++h) {
        __m256i p[dw_pairs];  // (tap 2i, tap 2i + 1) per channel
        for (std::size_t i = 0; i < dw_pairs; ++i) p[i] = ld(d.wt + (i * cp + c0) * 2 + h * 16);
        b.top[0][h] = _mm256_blend_epi16(p[0], p[1], 0xAA);                                       // (0, 3)
        b.top[1][h] = _mm256_or_si256(_mm256_srli_epi32(p[0], 16), _mm256_slli_epi32(p[2], 16));  // (1, 4)
        b.top[2][h] = _mm256_blend_epi16(p[1], p[2], 0xAA);                                       // (2, 5)
        b.bottom[0][h] = _mm256_and_si256(p[3], low16);                                           // (6, 0)
        b.bottom[1][h] = _mm256_srli_epi32(p[3], 16);                                             // (7, 0)
        b.bottom[2][h] = _mm256_and_si256(p[4], low16);                                           // (8, 0)
    }
    return b;
}

// Scratch columns [0, ncols) for input columns -pad_w... of rows `row` (null outside the
// image), channels [c0, c0 + width): x widened as it is, and the zero point outside the
// image, so that every window sums (x - z) w over all 9 taps as sum x w - z sum w, with
// the second term constant per channel (block_consts).
template <bool Signed>
I8_AVX2 void fill_columns(const dw_args& d, const std::uint8_t* const row[3], std::size_t c0, std::size_t width,
                          std::size_t ncols, std::int16_t* scratch) {
    const __m256i z = _mm256_set1_epi16(static_cast<std::int16_t>(d.x_zero)), zero = _mm256_setzero_si256();
    for (std::size_t j = 0; j < ncols; ++j) {
        const std::ptrdiff_t ix = static_cast<std::ptrdiff_t>(j) - static_cast<std::ptrdiff_t>(d.pad_w);
        const bool inside = ix >= 0 && ix < static_cast<std::ptrdiff_t>(d.w);
        __m256i v[3];
        for (int r = 0; r < 3; ++r)
            v[r] = inside && row[r] ? widen16<Signed>(row[r] + static_cast<std::size_t>(ix) * d.c + c0, width) : z;
        std::int16_t* s = scratch + j * col_elems;
        st(s, _mm256_unpacklo_epi16(v[0], v[1]));
        st(s + 16, _mm256_unpackhi_epi16(v[0], v[1]));
        st(s + 32, _mm256_unpacklo_epi16(v[2], zero));
        st(s + 48, _mm256_unpackhi_epi16(v[2], zero));
    }
}

// 8 values of a padded per-channel array in the accumulators' order: channels c + off ..
// c + off + 3 and c + off + 8 .. c + off + 11 (off 0: the lo vector, 4: the hi one).
I8_AVX2 inline __m256i lanes_i(const std::int32_t* p, std::size_t c, std::size_t off) {
    return _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c + off + 8)),
                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + c + off)));
}
I8_AVX2 inline __m256 lanes_f(const float* p, std::size_t c, std::size_t off) {
    return _mm256_set_m128(_mm_loadu_ps(p + c + off + 8), _mm_loadu_ps(p + c + off));
}

// The accumulators' start for one block (lo, hi): -z sum w, plus comp where the row
// requantizes itself (Own), and that row's scales in the accumulators' order.
struct block_consts {
    __m256i start[2];
    __m256 qscale[2], scale[2];
};

template <bool Own>
I8_AVX2 inline block_consts consts_of(const dw_args& d, const block_weights& b, std::size_t c0) {
    block_consts k;
    const __m256i z = _mm256_set1_epi16(static_cast<std::int16_t>(d.x_zero));
    for (std::size_t h = 0; h < 2; ++h) {
        __m256i zw = _mm256_setzero_si256();
        for (std::size_t kx = 0; kx < 3; ++kx)
            zw = _mm256_add_epi32(
                zw, _mm256_add_epi32(_mm256_madd_epi16(z, b.top[kx][h]), _mm256_madd_epi16(z, b.bottom[kx][h])));
        k.start[h] = _mm256_sub_epi32(Own ? lanes_i(d.q.comp, c0, 4 * h) : _mm256_setzero_si256(), zw);
        k.qscale[h] = Own ? lanes_f(d.q.qscale, c0, 4 * h) : _mm256_setzero_ps();
        k.scale[h] = Own ? lanes_f(d.q.scale, c0, 4 * h) : _mm256_setzero_ps();
    }
    return k;
}

// One output pixel's accumulators (lo, hi) from its window's first scratch column.
I8_AVX2 inline void window(const block_weights& b, const block_consts& k, const std::int16_t* s, __m256i& lo,
                           __m256i& hi) {
    lo = k.start[0];
    hi = k.start[1];
    for (std::size_t kx = 0; kx < 3; ++kx, s += col_elems) {
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(ld(s), b.top[kx][0]));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(ld(s + 16), b.top[kx][1]));
        lo = _mm256_add_epi32(lo, _mm256_madd_epi16(ld(s + 32), b.bottom[kx][0]));
        hi = _mm256_add_epi32(hi, _mm256_madd_epi16(ld(s + 48), b.bottom[kx][1]));
    }
}

// One output row's pixels for one channel block; out points at pixel 0, channel c0. Own:
// u8/s8 output of f32_exact accumulators, requantized here; else requant_avx2.hpp's store16.
template <bool Own, bool Unsigned_out>
I8_AVX2 void row_block(const dw_args& d, const block_weights& b, const block_consts& k, const std::int16_t* scratch,
                       char* out, std::size_t c0, std::size_t width, std::size_t esize) {
    const std::size_t step = d.stride_w * col_elems, pixel = d.c * esize;
    const exact_consts l = exact_consts_of(d.q);
    for (std::size_t ox = 0; ox < d.ow; ++ox, scratch += step, out += pixel) {
        __m256i lo, hi;
        window(b, k, scratch, lo, hi);
        if constexpr (Own) {
            const __m256i l0 = exact_offsets8(l, lo, k.qscale[0], k.scale[0]);
            const __m256i l1 = exact_offsets8(l, hi, k.qscale[1], k.scale[1]);
            // Per 128-bit lane (channels 0-3 | 8-11 of lo, 4-7 | 12-15 of hi): int16 in
            // channel order 0-7 | 8-15.
            store_levels16(l, Unsigned_out, out, _mm256_packs_epi32(l0, l1), width);
        } else
            store16(d.q, out, _mm256_permute2x128_si256(lo, hi, 0x20), _mm256_permute2x128_si256(lo, hi, 0x31), c0,
                    width);
    }
}

template <bool Signed, bool Own, bool Unsigned_out>
I8_AVX2 void rows(const dw_args& d, std::size_t r0, std::size_t r1) {
    const std::size_t cp = padded(d.c), esize = d.q.out == out_kind::f32 ? 4 : 1;
    const std::size_t ncols = (d.ow - 1) * d.stride_w + 3;
    std::vector<std::int16_t> scratch(ncols * col_elems);
    const auto* x = static_cast<const std::uint8_t*>(d.x);
    // Strips of `strip` output rows, blocks inside a strip, rows inside a block: a block's
    // weights and constants are built once per strip (at 7x7 a row is only 7 pixels) while
    // the strip's input rows stay in the caches across the blocks.
    constexpr std::size_t strip = 8;
    for (std::size_t s0 = r0; s0 < r1; s0 += strip)
        for (std::size_t c0 = 0; c0 < d.c; c0 += 16) {
            const std::size_t width = std::min<std::size_t>(16, d.c - c0);
            const block_weights b = weights_of(d, cp, c0);
            const block_consts k = consts_of<Own>(d, b, c0);
            for (std::size_t r = s0; r < std::min(r1, s0 + strip); ++r) {
                const std::size_t n = r / d.oh, oy = r % d.oh;
                const std::ptrdiff_t iy0 =
                    static_cast<std::ptrdiff_t>(oy * d.stride_h) - static_cast<std::ptrdiff_t>(d.pad_h);
                const std::uint8_t* row[3];  // the window's input rows, null outside the image
                for (int ky = 0; ky < 3; ++ky) {
                    const std::ptrdiff_t iy = iy0 + ky;
                    row[ky] = iy >= 0 && iy < static_cast<std::ptrdiff_t>(d.h)
                                  ? x + (n * d.h + static_cast<std::size_t>(iy)) * d.w * d.c
                                  : nullptr;
                }
                char* out = static_cast<char*>(d.y) + ((n * d.oh + oy) * d.ow * d.c + c0) * esize;
                fill_columns<Signed>(d, row, c0, width, ncols, scratch.data());
                row_block<Own, Unsigned_out>(d, b, k, scratch.data(), out, c0, width, esize);
            }
        }
}

template <bool Signed>
I8_AVX2 void rows_for(const dw_args& d, std::size_t r0, std::size_t r1) {
    if (d.q.f32_exact && d.q.out == out_kind::u8)
        rows<Signed, true, true>(d, r0, r1);
    else if (d.q.f32_exact && d.q.out == out_kind::s8)
        rows<Signed, true, false>(d, r0, r1);
    else
        rows<Signed, false, false>(d, r0, r1);
}

I8_AVX2 void depthwise(const dw_args& d, std::size_t r0, std::size_t r1) {
    if (d.x_signed)
        rows_for<true>(d, r0, r1);
    else
        rows_for<false>(d, r0, r1);
}

}  // namespace

dw_fn avx2_depthwise() { return depthwise; }

}  // namespace kiln::cpu::i8g
