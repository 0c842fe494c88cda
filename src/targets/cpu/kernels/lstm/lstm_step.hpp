// One time step of the cpu::lstm_packed kernel (lstm_kernel.cpp): what a step reads and
// writes, and its vector form in lstm_step_avx2.cpp. Private to the lstm folder.
#pragma once
#include "targets/cpu/kernels/lstm/lstm_kernel.hpp"

#include <cstddef>

namespace kiln::cpu::lstm_detail {

constexpr std::size_t B = lstm_block;
constexpr std::size_t G = lstm_gates * lstm_block;  // floats per packed row of a block

// What one time step of one direction needs (batch rows n: h_prev + n*H, g + n*gstride,
// c + n*blocks*B, y + n*H).
struct step_args {
    std::size_t N, H, blocks, gstride;
    const float* r;     // this direction's packed R [blocks, H, 32]
    const float* bias;  // [C]
    const float* peep;  // [blocks, 3, 8] or null
    const float* h_prev;  // null: zeros (first step without initial_h)
    const float* g;       // input projection of time t
    float* c;             // cell state, updated in place
    float* y;             // h_t
    // Visit the blocks last to first: alternate steps do, so that each step starts on the
    // blocks the previous one touched last, still in L2 (a thread's share of R is about
    // as large as L2 itself, where a cyclic walk in one direction would always miss).
    bool backwards;
};

// The i-th block of [b0, b1) in the order of this step.
inline std::size_t block_at(const step_args& a, std::size_t b0, std::size_t b1, std::size_t i) {
    return a.backwards ? b1 - 1 - i : b0 + i;
}


using step_fn = void (*)(const step_args&, std::size_t, std::size_t);

// AVX2 + FMA (compiled for them by function attributes, called only where cpuid has them);
// null where the build is not for x86.
extern const step_fn step_avx2;

}  // namespace kiln::cpu::lstm_detail
