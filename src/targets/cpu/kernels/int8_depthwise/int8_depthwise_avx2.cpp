// The exact depthwise 3x3 int8 convolution for CPUs with AVX2 (chosen by cpuid,
// int8_depthwise.cpp): channels-last, 16 channels per step: two taps' 16 activations at a
// time widened to int16, the zero point subtracted, interleaved (vpunpck[lh]wd) and
// multiplied by the taps' interleaved int16 weights with vpmaddwd (|x - z| <= 255 and
// |w| <= 128: exact in int32, nothing saturates); a tap outside the image adds zeros (as
// ref's zero padding of x - z). Then the requantize (requant_avx2.hpp).
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/kernels/int8_gemm/requant_avx2.hpp"

#include <algorithm>
#include <cstring>

namespace kiln::cpu::i8g {
namespace {

template <bool Signed>
I8_AVX2 inline __m256i widen16(const void* p, std::size_t width) {
    __m128i v;
    if (width == 16) v = _mm_loadu_si128(static_cast<const __m128i*>(p));
    else {
        alignas(16) std::uint8_t tmp[16] = {};
        std::memcpy(tmp, p, width);
        v = _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
    }
    return Signed ? _mm256_cvtepi8_epi16(v) : _mm256_cvtepu8_epi16(v);
}

template <bool Signed>
I8_AVX2 void rows(const dw_args& d, std::size_t r0, std::size_t r1) {
    const std::size_t cp = padded(d.c), esize = d.q.out == out_kind::f32 ? 4 : 1;
    const __m256i z = _mm256_set1_epi16(static_cast<std::int16_t>(d.x_zero));
    const auto* x = static_cast<const std::uint8_t*>(d.x);
    for (std::size_t r = r0; r < r1; ++r) {
        const std::size_t n = r / d.oh, oy = r % d.oh;
        const std::ptrdiff_t iy0 = static_cast<std::ptrdiff_t>(oy * d.stride_h) - static_cast<std::ptrdiff_t>(d.pad_h);
        const std::uint8_t* row[3];  // the window's input rows, null outside the image
        for (int ky = 0; ky < 3; ++ky) {
            const std::ptrdiff_t iy = iy0 + ky;
            row[ky] = iy >= 0 && iy < static_cast<std::ptrdiff_t>(d.h)
                          ? x + (n * d.h + static_cast<std::size_t>(iy)) * d.w * d.c
                          : nullptr;
        }
        for (std::size_t ox = 0; ox < d.ow; ++ox) {
            const std::ptrdiff_t ix0 = static_cast<std::ptrdiff_t>(ox * d.stride_w) - static_cast<std::ptrdiff_t>(d.pad_w);
            const std::uint8_t* src[10] = {};  // per tap, null outside the image (and tap 9)
            for (int kx = 0; kx < 3; ++kx) {
                const std::ptrdiff_t ix = ix0 + kx;
                if (ix < 0 || ix >= static_cast<std::ptrdiff_t>(d.w)) continue;
                for (int ky = 0; ky < 3; ++ky)
                    if (row[ky]) src[ky * 3 + kx] = row[ky] + static_cast<std::size_t>(ix) * d.c;
            }
            char* out = static_cast<char*>(d.y) + ((n * d.oh + oy) * d.ow + ox) * d.c * esize;
            for (std::size_t c = 0; c < d.c; c += 16) {
                const std::size_t width = std::min<std::size_t>(16, d.c - c);
                // lo: channels 0-3 and 8-11 of the block, hi: 4-7 and 12-15 (the unpack order).
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
                for (std::size_t p = 0; p < dw_pairs; ++p) {
                    const std::uint8_t* s0 = src[2 * p];
                    const std::uint8_t* s1 = src[2 * p + 1];
                    if (!s0 && !s1) continue;
                    const __m256i x0 = s0 ? _mm256_sub_epi16(widen16<Signed>(s0 + c, width), z) : _mm256_setzero_si256();
                    const __m256i x1 = s1 ? _mm256_sub_epi16(widen16<Signed>(s1 + c, width), z) : _mm256_setzero_si256();
                    const std::int16_t* w = d.wt + (p * cp + c) * 2;
                    lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_unpacklo_epi16(x0, x1),
                                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w))));
                    hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_unpackhi_epi16(x0, x1),
                                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 16))));
                }
                store16(d.q, out + c * esize, _mm256_permute2x128_si256(lo, hi, 0x20),
                        _mm256_permute2x128_si256(lo, hi, 0x31), c, width);
            }
        }
    }
}

I8_AVX2 void depthwise(const dw_args& d, std::size_t r0, std::size_t r1) {
    if (d.x_signed) rows<true>(d, r0, r1);
    else rows<false>(d, r0, r1);
}

}  // namespace

dw_fn avx2_depthwise() { return depthwise; }

}  // namespace kiln::cpu::i8g
