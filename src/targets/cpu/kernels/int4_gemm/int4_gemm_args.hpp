// What one run of an int4 GEMM (int4_gemm.hpp) needs, and the packed layout the ISA
// variants share. Plain data only: the variants are compiled with different target
// attributes and share nothing but this header.
//
// Weights, for panels of 16 columns: b [panels][k][8] bytes, byte j of row k holding
// column 16 p + j in its low nibble and column 16 p + j + 8 in its high one, each as
// u = q + 8 (0..15: offset binary, so one AND and one shift unpack them); so
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
};

inline std::size_t panels(std::size_t n) { return (n + panel - 1) / panel; }
inline std::size_t blocks(const args& g) { return (g.k + g.block - 1) / g.block; }

// Computes C rows [m0, m1) x panels [p0, p1). Parts are independent.
using part_fn = void (*)(const args&, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1);

part_fn generic_part();
part_fn avx2_part();    // only for CPUs with AVX2 and FMA
part_fn avx512_part();  // only for CPUs with AVX-512 F, DQ, VL and BW

}  // namespace kiln::cpu::int4g
