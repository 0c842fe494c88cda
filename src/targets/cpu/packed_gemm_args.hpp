// What one run of a packed GEMM (packed_gemm.hpp) needs: sizes, pointers, the fused
// epilogue, and the part-runner each ISA variant provides. Plain data only, so that the
// variants (compiled with different target attributes) share nothing but this header.
#pragma once
#include "targets/cpu/fused_post_kind.hpp"

#include <cstddef>

namespace kiln::cpu::pgemm {

constexpr std::size_t panel = 16;  // columns per packed panel of B
constexpr std::size_t tile_rows = 6;  // rows per micro-tile (12 ymm accumulators)

// A fused post-op as the epilogue applies it, in order, after the bias.
using post_kind = fused_post_kind;
struct post_step {
    post_kind kind = post_kind::relu;
    float alpha = 0.0f, beta = 0.0f;
    const float* src = nullptr;  // binary: [n] per column (row_stride 0) or [m][n] (row_stride n)
    std::size_t row_stride = 0;
};
constexpr int max_post_steps = 8;

struct args {
    std::size_t m = 0, n = 0, k = 0;  // C[m][n] = A[m][k] B[k][n]
    std::size_t kc = 0;               // k block: the B micro-panel kc x 16 stays in L1
    const float* a = nullptr;         // [m][k] row-major
    const float* b = nullptr;         // [ceil(n/16)][k][16], zero-padded columns
    const float* bias = nullptr;      // [n] or null
    float* c = nullptr;               // [m][n] row-major
    post_step post[max_post_steps];
    int n_post = 0;
};

// Computes C rows [m0, m1) x panels [p0, p1) completely (all k blocks, bias, post-ops).
// Parts are independent: threads run disjoint parts without synchronization.
using part_fn = void (*)(const args&, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1);

part_fn generic_part();
part_fn avx2_part();  // only for CPUs with AVX2 and FMA

}  // namespace kiln::cpu::pgemm
