// CUDA C++ for a fused group (src/codegen/plan.hpp). Every kernel has the signature
//
//   extern "C" __global__ void NAME(const kiln_args a_)   // kiln_args: kiln_device.h
//
// and runs in blocks of block_size threads.
//
// Elementwise plans: a grid-stride loop, one element per thread and step: the flat index
// is split into the plan's (collapsed) outer dims by constant divisions, each tensor read
// at its constant strides, so broadcast inputs cost no copies.
//
// Reduction plans: a grid-stride loop over rows (outer indices). A row belongs to one warp
// (short rows: 8 rows per block, no shared memory, no __syncthreads) or to a whole block
// (long rows). Per row, each pass is a strided loop over the inner space accumulating the
// pass's reductions in registers (sum, mean, l1, l2, sum_square, log_sum and prod in
// double, as the cpu generator and the reference do; max and min in float with a NaN
// flag), then a warp butterfly (and, per block, one slot per warp in shared memory) that
// leaves every thread with the row's results; row nodes are computed once per row, then a
// last strided loop writes the elements (or thread 0 writes the row's one value).
//
// Each node is the shared expression of its op (src/codegen/expr.hpp), so the arithmetic
// is the cpu kernels' and the reference's.
#pragma once
#include "codegen/plan.hpp"

#include <cstddef>
#include <string>

namespace kiln::gpu::codegen {

// Threads per block of every generated kernel (its __launch_bounds__ and the launch):
// reduction kernels too, so a launch is described by its grid alone.
inline constexpr unsigned block_size = 256;
// Rows one block takes at a time in a reduction kernel: one per warp, or one.
inline constexpr unsigned warp_rows = block_size / 32;

// Whether a plan is one this generator writes (elementwise or reduction groups).
bool can_emit(const kiln::codegen::plan& p);
// Whether a reduction plan's rows go one per warp (short inner spaces) rather than one
// per block.
bool warp_per_row(const kiln::codegen::plan& p);
// One kernel named `name`.
std::string emit_kernel(const kiln::codegen::plan& p, const std::string& name);
// The kernel's symbol: derived from its source, so equal groups share one function.
std::string kernel_symbol(const kiln::codegen::plan& p);
// Blocks to launch: enough for one element per thread (elementwise) or one row per warp
// or block (reductions), at most 65535 * 8; the grid-stride loops cover the rest.
unsigned grid_size(const kiln::codegen::plan& p);

}  // namespace kiln::gpu::codegen
