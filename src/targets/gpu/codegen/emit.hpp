// CUDA C++ for a fused elementwise group (a plan without reductions, src/codegen/plan.hpp).
// Every kernel has the signature
//
//   extern "C" __global__ void NAME(const kiln_args a)   // kiln_args: kiln_device.h
//
// and computes the plan's elements with a grid-stride loop, one element per thread and
// step: the flat index is split into the plan's (collapsed) outer dims by constant
// divisions, each tensor read at its constant strides, so broadcast inputs cost no
// copies. Each node is the shared expression of its op (src/codegen/expr.hpp), so the
// arithmetic is the cpu kernels' and the reference's.
#pragma once
#include "codegen/plan.hpp"

#include <cstddef>
#include <string>

namespace kiln::gpu::codegen {

// Threads per block of every generated kernel (its __launch_bounds__).
inline constexpr unsigned block_size = 256;

// Whether a plan is one this generator writes (elementwise; reductions come later).
bool can_emit(const kiln::codegen::plan& p);
// One kernel named `name`.
std::string emit_kernel(const kiln::codegen::plan& p, const std::string& name);
// The kernel's symbol: derived from its source, so equal groups share one function.
std::string kernel_symbol(const kiln::codegen::plan& p);
// Blocks to launch for the plan's elements (at most 65535 * 8 blocks; the grid-stride
// loop covers the rest).
unsigned grid_size(const kiln::codegen::plan& p);

}  // namespace kiln::gpu::codegen
