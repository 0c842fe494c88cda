// What one run of a Winograd convolution (winograd.hpp) needs: geometry, pointers, and
// the phase functions each ISA variant provides. Plain data only, so that the variants
// (compiled with different target attributes) share nothing but this header.
#pragma once
#include "targets/cpu/kernels/fused_post_kind.hpp"

#include <cstddef>
#include <cstdint>

namespace kiln::cpu::wino {

// A fused post-op as the output transform applies it.
using post_kind = fused_post_kind;
struct post_step {
    post_kind kind = post_kind::relu;
    float alpha = 0.0f, beta = 0.0f;
    const float* src = nullptr;  // binary: a tensor in the output's blocked layout
};
constexpr int max_post_steps = 8;

struct args {
    int m = 4;           // output tile size: F(m x m, 3 x 3), m = 4 or 2
    // Channels stored together per pixel (pixel_channels) of x and of y: 8 or 16 for
    // oneDNN's blocked layouts, all channels for channels-last; multiples of 8.
    std::size_t in_block = 8, out_block = 8;
    std::size_t n = 1, h = 0, w = 0, ho = 0, wo = 0;
    std::int64_t pad_t = 0, pad_l = 0;
    std::size_t cin = 0, cin_p = 0;     // input channels, padded to the block
    std::size_t cout = 0, cout_p = 0;   // output channels, padded to the block
    std::size_t cout16 = 0;             // output channels padded to 16 (the GEMM's column blocks)
    std::size_t tiles_h = 0, tiles_w = 0, tiles = 0;  // tiles per image row/column, all images
    std::size_t group = 0;              // tiles transformed and multiplied together (rows of V and M)
    std::size_t v_pitch = 0, m_pitch = 0;  // floats between V's and M's alpha^2 rows (winograd.cpp)
    const float* x = nullptr;           // [n][cin_p/in_block][h][w][in_block]
    const float* u = nullptr;           // [alpha^2][cout16/16][cin_p][16]
    const float* bias = nullptr;        // [cout] or null
    float* y = nullptr;                 // [n][cout_p/out_block][ho][wo][out_block]
    post_step post[max_post_steps];
    int n_post = 0;
};

// The three phases for one group of tiles [t0, t0 + count) and the output columns
// [16 c0, 16 c1): V = [alpha^2][group][cin_p] and M = [alpha^2][group][16 (c1 - c0)] (rows
// v_pitch and m_pitch apart) are
// the caller's scratch (one pair per thread: the phases need no synchronization).
struct phases {
    void (*input)(const args&, std::size_t t0, std::size_t count, float* v);
    void (*gemm)(const args&, std::size_t count, const float* v, float* m, std::size_t c0, std::size_t c1);
    void (*output)(const args&, std::size_t t0, std::size_t count, const float* m, std::size_t c0, std::size_t c1);
};

phases generic_phases();
phases avx2_phases();    // only for CPUs with AVX2 and FMA
phases avx512_phases();  // only for CPUs with AVX-512 F, DQ, VL and BW (cpu::has_avx512())

}  // namespace kiln::cpu::wino
