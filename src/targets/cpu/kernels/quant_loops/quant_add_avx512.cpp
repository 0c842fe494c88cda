// op::quant_add on AVX-512 (quant_loops.hpp), chosen by cpuid in quant_add_kernel::compute.
// GCC's vectorization of the portable loop (target_clones, 256-bit vectors by its tuning)
// ran ResNet-50's 15 residual adds at 1.37 ms of a 7.2 ms int8 run on an AMD Zen 5; this
// loop takes 16 bytes per vector through 32-bit lanes and does the same float32 steps in
// the same order (no FMA: src/CMakeLists.txt compiles this folder with -ffp-contract=off;
// GCC would otherwise fuse a product with the add after it), so it equals ref bit for
// bit: (a - za) * sa + (b - zb) * sb, / y_scale, round half to even by the 1.5 * 2^23
// addition, + zy, saturate.
#include "targets/cpu/kernels/quant_loops/quant_add_avx512.hpp"

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics start conversions from _mm*_undefined_*(), which its own flow
// analysis then reports as maybe-uninitialized (as in packed_gemm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

namespace kiln::cpu {
namespace {

#define KILN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

constexpr float round_magic = 12582912.0f;

struct add_consts {
    __m512 za, zb, zy, sa, sb, sy, lo, hi, magic;
};

template <class T>
KILN_AVX512 inline __m512 widen(const T* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_cvtepi32_ps(std::is_signed_v<T> ? _mm512_cvtepi8_epi32(v) : _mm512_cvtepu8_epi32(v));
}

template <class T>
KILN_AVX512 inline void add16(const add_consts& k, const T* a, const T* b, T* y) {
    const __m512 x = _mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(widen(a), k.za), k.sa),
                                   _mm512_mul_ps(_mm512_sub_ps(widen(b), k.zb), k.sb));
    __m512 q = _mm512_add_ps(_mm512_sub_ps(_mm512_add_ps(_mm512_div_ps(x, k.sy), k.magic), k.magic), k.zy);
    q = _mm512_min_ps(_mm512_max_ps(q, k.lo), k.hi);  // saturate: the int32 below fits T
    const __m512i i = _mm512_cvttps_epi32(q);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y),
                     std::is_signed_v<T> ? _mm512_cvtsepi32_epi8(i) : _mm512_cvtusepi32_epi8(i));
}

template <class T>
KILN_AVX512 void add_values(const op::quant_add& p, const T* a, const T* b, T* y, std::size_t n) {
    add_consts k;
    k.za = _mm512_set1_ps(static_cast<float>(p.a_zero_point));
    k.zb = _mm512_set1_ps(static_cast<float>(p.b_zero_point));
    k.zy = _mm512_set1_ps(static_cast<float>(p.y_zero_point));
    k.sa = _mm512_set1_ps(p.a_scale);
    k.sb = _mm512_set1_ps(p.b_scale);
    k.sy = _mm512_set1_ps(p.y_scale);
    k.lo = _mm512_set1_ps(std::is_signed_v<T> ? -128.0f : 0.0f);
    k.hi = _mm512_set1_ps(std::is_signed_v<T> ? 127.0f : 255.0f);
    k.magic = _mm512_set1_ps(round_magic);
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {  // four independent vectors: the divisions overlap
        add16(k, a + i, b + i, y + i);
        add16(k, a + i + 16, b + i + 16, y + i + 16);
        add16(k, a + i + 32, b + i + 32, y + i + 32);
        add16(k, a + i + 48, b + i + 48, y + i + 48);
    }
    for (; i + 16 <= n; i += 16) add16(k, a + i, b + i, y + i);
    if (i < n) {  // the tail through a zero-padded copy
        alignas(16) T ta[16] = {}, tb[16] = {}, ty[16];
        std::copy(a + i, a + n, ta);
        std::copy(b + i, b + n, tb);
        add16(k, ta, tb, ty);
        std::copy(ty, ty + (n - i), y + i);
    }
}

}  // namespace

void quant_add_avx512(const op::quant_add& p, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                      std::size_t n) {
    add_values(p, a, b, y, n);
}
void quant_add_avx512(const op::quant_add& p, const std::int8_t* a, const std::int8_t* b, std::int8_t* y,
                      std::size_t n) {
    add_values(p, a, b, y, n);
}

}  // namespace kiln::cpu

#else

namespace kiln::cpu {
void quant_add_avx512(const op::quant_add&, const std::uint8_t*, const std::uint8_t*, std::uint8_t*, std::size_t) {}
void quant_add_avx512(const op::quant_add&, const std::int8_t*, const std::int8_t*, std::int8_t*, std::size_t) {}
}  // namespace kiln::cpu

#endif
