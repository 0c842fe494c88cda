// What one run of the exact int8 kernels (int8_gemm.hpp, int8_depthwise.hpp) needs, and the
// packed layouts the ISA variants share. Plain data only: the variants are compiled with
// different target attributes and share nothing but this header (and, for the AVX2 ones,
// requant_avx2.hpp).
//
// GEMM weights, for panels of 16 columns: b [panels][k2][16][2] int16, k2 = ceil(k / 2): the
// two int16 of column j at pair k2 are w[2 k2][j], w[2 k2 + 1][j] (0 past k or n). One k2 row
// of a panel is two ymm registers; A's pair (a[2 k2], a[2 k2 + 1]) widened to int16 and
// broadcast as one 32-bit word times it with vpmaddwd (_mm256_madd_epi16) gives the 8
// columns' int32 sums of two products, exactly: u8/s8 x s8 products are at most 32640 in
// magnitude and nothing is summed in 16 bits (vpmaddubsw's saturation is what oneDNN's
// kernels without VNNI suffer from).
//
// The requantize (ops/quant_fused.hpp, the ref target's arithmetic, bit for bit):
//   acc  = sum a w + comp[c]        (int32; comp = -x_zero_point * sum_k w[k][c], and the
//                                    int32 bias where f32_exact)
//   v    = f32_exact ? float(acc) * scale[c]
//                    : float((double(acc) + ibias[c]) * double(scale[c]) + fbias[c])
//   y    = float v, or clamp(round_half_even(v / y_scale) + y_zero_point, y_min, y_max)
// f32_exact holds where every |acc| is at most 2^24 (255 sum |w| + |bias| per channel) and
// there is no float bias: float(acc) is then exact and the float product of two 24-bit
// mantissas rounds once, as the double product (exact) rounded to float does in ref.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::i8g {

// VNNI weights (int8_gemm_vnni.cpp), the same panels of 16 columns as bytes: b8 [panels][k4]
// [16][4] int8, k4 = ceil(k / 4), the four bytes of column j at quad q w[4 q .. 4 q + 3][j]
// (0 past k or n): one zmm per quad of k, which vpdpbusd multiplies by A's four bytes
// broadcast as one 32-bit word. vpdpbusd takes u8 x s8, so s8 activations are shifted by
// +128 (a xor 0x80) and comp holds -128 sum_k w[k][c] more (quads_comp_shift).
constexpr std::size_t panel = 16;      // columns per panel
constexpr std::size_t tile_rows = 6;   // rows of the register tile (12 ymm accumulators)
constexpr std::size_t vnni_tile_rows = 8;  // the VNNI kernel's (8 x 2 panels, 16 zmm)

inline std::size_t panels(std::size_t n) { return (n + panel - 1) / panel; }
inline std::size_t pairs(std::size_t k) { return (k + 1) / 2; }
inline std::size_t padded(std::size_t n) { return panels(n) * panel; }
inline std::size_t quads(std::size_t k) { return (k + 3) / 4; }
constexpr std::int32_t quads_comp_shift = -128;  // times sum_k w, for s8 activations

enum class out_kind : std::uint8_t { f32, u8, s8 };

struct requant {
    const std::int32_t* comp = nullptr;  // [padded(n)]
    const float* scale = nullptr;        // [padded(n)] x_scale * w_scale, in float
    const float* qscale = nullptr;       // [padded(n)] fl(scale * fl(1 / y_scale)): requant_avx2.hpp
    const double* dscale = nullptr;      // [padded(n)] the same as double
    const double* ibias = nullptr;       // [padded(n)] int32 bias (0 where none or f32_exact)
    const double* fbias = nullptr;       // [padded(n)] float32 bias (0 where none)
    bool f32_exact = false;
    out_kind out = out_kind::f32;
    float y_scale = 1.0f, y_zero = 0.0f, y_min = 0.0f, y_max = 0.0f;
    float y_inv = 1.0f;  // 1 / y_scale: the vector kernels' fast quotient, checked (requant_avx2.hpp)
};

// The portable requantize of one accumulator of channel c (also the reference for tests).
inline float requant_value(const requant& q, std::int32_t acc, std::size_t c) {
    if (q.f32_exact) return static_cast<float>(acc) * q.scale[c];
    return static_cast<float>((static_cast<double>(acc) + q.ibias[c]) * q.dscale[c] + q.fbias[c]);
}

struct gemm_args {
    std::size_t m = 0, n = 0, k = 0;  // C[m][n] = A[m][k] W[k][n]
    const void* a = nullptr;          // [m][lda] uint8 or int8
    std::size_t lda = 0;
    bool a_signed = false;
    const std::int16_t* b = nullptr;  // [panels][k2][16][2]
    const std::int8_t* b8 = nullptr;  // [panels][k4][16][4] (the VNNI kernel's; comp shifted)
    void* c = nullptr;                // [m][ldc] float32, uint8 or int8 (q.out)
    std::size_t ldc = 0;
    requant q;
};

// Computes C rows [m0, m1) x panels [p0, p1); parts are independent.
using gemm_fn = void (*)(const gemm_args&, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1);
gemm_fn generic_gemm();
gemm_fn avx2_gemm();  // only for CPUs with AVX2
gemm_fn vnni_gemm();  // only for CPUs with AVX-512 VNNI; reads b8
// The AVX2 requantize and store of `rows` rows of one panel's accumulators acc [rows][16]
// (comp not yet added) into C from row `row`, channels [c, c + width): for the VNNI kernel,
// whose own target has FMA, which would fuse what ref rounds twice (requant_avx2.hpp).
void avx2_store_rows(const gemm_args& g, const std::int32_t* acc, int rows, std::size_t row, std::size_t c,
                     std::size_t width);

// Depthwise 3x3 (group = channels, one output channel per input channel), channels-last
// x [n][h][w][c] and y [n][oh][ow][c]; weights int16 [5 tap pairs][padded(c)][2] (taps 2p and
// 2p + 1, tap kh * 3 + kw; tap 9 is 0), the channels of each 16-channel block in the order
// vpunpcklwd / vpunpckhwd leave them in: 0-3, 8-11, 4-7, 12-15 (dw_weight_index).
// acc = sum over the taps inside the image of (x - x_zero) w, + comp (the int32 bias where
// f32_exact, else 0); padding adds nothing, as ref's shifted zero padding.
struct dw_args {
    std::size_t batch = 0, h = 0, w = 0, c = 0, oh = 0, ow = 0;
    std::size_t stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0;
    const void* x = nullptr;
    bool x_signed = false;
    std::int32_t x_zero = 0;
    const std::int16_t* wt = nullptr;
    void* y = nullptr;
    requant q;
};

constexpr std::size_t dw_pairs = 5;
inline std::size_t dw_weight_index(std::size_t tap, std::size_t c, std::size_t cp) {
    const std::size_t j = c & 15;
    const std::size_t pos = (j & 3) | ((j & 4) << 1) | ((j & 8) >> 1);
    return ((tap / 2) * cp + (c & ~std::size_t{15}) + pos) * 2 + (tap & 1);
}

// Output rows [r0, r1) of batch * oh.
using dw_fn = void (*)(const dw_args&, std::size_t r0, std::size_t r1);
dw_fn generic_depthwise();
dw_fn avx2_depthwise();  // only for CPUs with AVX2

}  // namespace kiln::cpu::i8g
