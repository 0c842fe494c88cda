// CUDA C++ for an LSTM's recurrence: a gpu::fused_kernel whose body is one
// gpu::lstm_steps node (kernels/lstm_steps.hpp) over xw (the input projection of every
// time step, done before by cuBLASLt), R transposed, and the optional bias and initial
// states; its output is the packed [T + 2, D, B, H] buffer (Y, Y_h, Y_c).
//
// One persistent kernel per LSTM: a block takes one (direction, batch row) and loops over
// the time steps itself, h in shared memory and c in registers. Thread x owns hidden units
// x, x + 256, ... (up to 4): per step it accumulates its units' four gate rows of h R^T
// (float; h broadcast from shared memory, R^T's row k read at consecutive columns by
// consecutive threads: coalesced when R^T is row-major, as the lowering makes it for a
// literal R), adds xw and the two biases, applies the gates, and writes h back between two
// __syncthreads.
//
// Why a block per row rather than a cooperative grid: the step-to-step dependency is then
// a __syncthreads, the kernel is an ordinary launch (CUDA graphs record it; a cooperative
// launch with a grid barrier needs every block co-resident, cudaLaunchCooperativeKernel and
// a barrier the host runs of tests/gpu, one block after the other, cannot execute). The
// cost is R^T read from L2 each step by each block (1 MiB at H = 256; it stays in an
// H100/H200's 50-60 MB L2, and the blocks of a batch share it): an estimate of ~10 us per
// step at ~100 GB/s of L2 bandwidth per SM, not measured. A cooperative design keeping
// slices of R in the registers of many SMs is the next step for batch 1 if this proves slow.
#pragma once
#include "ops/fused.hpp"

#include <kiln/shape.hpp>

#include <string>
#include <vector>

namespace kiln::gpu::codegen {

// Largest hidden size: four units per thread of a 256-thread block.
inline constexpr std::size_t lstm_max_hidden = 1024;

// Whether `body` is one lstm_steps node over the kernel's inputs in order.
bool is_lstm(const op::fused& body);
// Why the generator cannot write it ("": it can): H over lstm_max_hidden, offsets past int.
std::string lstm_problem(const op::fused& body, const std::vector<shape>& inputs);
std::string emit_lstm_kernel(const op::fused& body, const std::vector<shape>& inputs, const std::string& name);
std::string lstm_symbol(const op::fused& body, const std::vector<shape>& inputs);
// One block per (direction, batch row); the kernel's loop covers a smaller grid.
unsigned lstm_grid(const op::fused& body, const std::vector<shape>& inputs);

}  // namespace kiln::gpu::codegen
