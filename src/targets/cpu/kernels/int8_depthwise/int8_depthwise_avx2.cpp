// The exact depthwise 3x3 int8 convolution for CPUs with AVX2 (chosen by cpuid,
// int8_depthwise.cpp): channels-last, 16 channels per step: each tap's 16 activations
// widened to int16, the zero point subtracted, multiplied by the tap's int16 weights
// (vpmullw: |x - z| <= 255 and |w| <= 128, so the product fits int16 exactly), widened and
// summed in int32; then the requantize (requant_avx2.hpp).
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
        for (std::size_t ox = 0; ox < d.ow; ++ox) {
            const std::ptrdiff_t ix0 = static_cast<std::ptrdiff_t>(ox * d.stride_w) - static_cast<std::ptrdiff_t>(d.pad_w);
            const std::uint8_t* src[9];
            int taps[9];
            int nt = 0;
            for (int t = 0; t < 9; ++t) {
                const std::ptrdiff_t iy = iy0 + t / 3, ix = ix0 + t % 3;
                if (iy < 0 || ix < 0 || iy >= static_cast<std::ptrdiff_t>(d.h) || ix >= static_cast<std::ptrdiff_t>(d.w))
                    continue;
                src[nt] = x + ((n * d.h + static_cast<std::size_t>(iy)) * d.w + static_cast<std::size_t>(ix)) * d.c;
                taps[nt++] = t;
            }
            char* out = static_cast<char*>(d.y) + ((n * d.oh + oy) * d.ow + ox) * d.c * esize;
            for (std::size_t c = 0; c < d.c; c += 16) {
                const std::size_t width = std::min<std::size_t>(16, d.c - c);
                __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
                for (int i = 0; i < nt; ++i) {
                    const __m256i xv = _mm256_sub_epi16(widen16<Signed>(src[i] + c, width), z);
                    const __m256i w = _mm256_loadu_si256(
                        reinterpret_cast<const __m256i*>(d.wt + static_cast<std::size_t>(taps[i]) * cp + c));
                    const __m256i prod = _mm256_mullo_epi16(xv, w);
                    a0 = _mm256_add_epi32(a0, _mm256_cvtepi16_epi32(_mm256_castsi256_si128(prod)));
                    a1 = _mm256_add_epi32(a1, _mm256_cvtepi16_epi32(_mm256_extracti128_si256(prod, 1)));
                }
                store16(d.q, out + c * esize, a0, a1, c, width);
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
