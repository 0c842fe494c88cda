// What one run of an int4 GEMM (int4_gemm.hpp) needs, and the packed layout the ISA
// variants share. Plain data only: the variants are compiled with different target
// attributes and share nothing but this header.
//
// Weights, for panels of 16 columns: b [panels][k][8] bytes, column 16 p + j of row k in
// byte j / 2 (the low nibble for even j), as u = q + 8 (0..15: offset binary). So the 32 bits
// at a row's start hold its first 8 columns: broadcast to 8 lanes and shifted right by
// 0, 4, ..., 28 (one variable shift and one AND, no shuffles: 1.45x the speed of widening
// split nibbles with vpmovzxbd, measured on Zen 3, one row, K = N = 256..4096); so
// [panels][blocks][2][16] floats: per block of K and column the scale s and the offset
// -(8 + zero point) s, so that the weight is u s + offset, one FMA (exact without a zero
// point: 8 s is a power-of-two multiple). Padded columns have u = 8, s = 0, offset 0.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kiln::cpu::int4g {

constexpr std::size_t panel = 16;        // columns per panel
constexpr std::size_t panel_bytes = 8;   // bytes per row of a panel

struct args {
    std::size_t m = 0, n = 0, k = 0, block = 32;  // C[m][n] = A[m][k] W[k][n]
    const float* a = nullptr;                     // [m][k] row-major
    const std::uint8_t* b = nullptr;              // [panels][k][8]
    const float* so = nullptr;                    // [panels][blocks][2][16]
    float* c = nullptr;                           // [m][n] row-major
    // [m][blocks]: the sum of each row of A over each block of K. The vector kernels
    // multiply A by u alone within a block and add s times that plus offset times this
    // sum at its end: two FMAs per 16 weights instead of four (fill_block_sums).
    const float* asum = nullptr;
};

inline std::size_t panels(std::size_t n) { return (n + panel - 1) / panel; }
inline std::size_t blocks(const args& g) { return (g.k + g.block - 1) / g.block; }

inline void fill_block_sums(const args& g, float* out) {
    const std::size_t nb = blocks(g);
    for (std::size_t i = 0; i < g.m; ++i)
        for (std::size_t b = 0; b < nb; ++b) {
            float s = 0;
            for (std::size_t k = b * g.block; k < g.k && k < (b + 1) * g.block; ++k) s += g.a[i * g.k + k];
            out[i * nb + b] = s;
        }
}

// Computes C rows [m0, m1) x panels [p0, p1). Parts are independent; the vector kernels
// read args::asum.
using part_fn = void (*)(const args&, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1);

part_fn generic_part();
part_fn avx2_part();    // only for CPUs with AVX2 and FMA
part_fn avx512_part();  // only for CPUs with AVX-512 F, DQ, VL and BW

// Writes panel p's weights of rows [k0, k0 + kc) as float32 [kc][16] into out: the
// transient tile many-row products multiply with the float32 packed GEMM's kernels.
using unpack_fn = void (*)(const args&, std::size_t p, std::size_t k0, std::size_t kc, float* out);
unpack_fn generic_unpack();
unpack_fn avx2_unpack();
unpack_fn avx512_unpack();

}  // namespace kiln::cpu::int4g
