// CUDA C++ for ops that only move data (no arithmetic), as gpu::fused_kernel bodies of one
// node whose arguments are the kernel's inputs in order:
//
//   reshape / flatten of a strided input (a view needs a row-major one): the input's
//     elements in row-major order into the standard output buffer;
//   gather (any axis, int32/int64 indices, negative ones counted from the end);
//   concat (any axis, up to 63 inputs);
//   tile, and pad in every mode (constant with its value input or zeros, edge, wrap,
//   reflect; negative pads crop).
//
// Same signature, block size and grid-stride loop as the elementwise kernels (emit.hpp):
// one output element per thread and step, its flat index split into the output's dims by
// constant divisions, every tensor read at its own (constant) strides. Elements are moved
// as unsigned integers of their size, so every element type but string works with one
// kernel per layout.
//
// Out-of-range gather indices: a kernel cannot throw. The kernel reads the clamped
// element (never memory outside the tensor) and records the first bad index in the
// module's `kiln_error_` (kiln_device.h); gpu_context::finish checks the libraries that
// have one after every eval and raises a runtime error with the index, the axis length and
// the kernel, so the caller gets an error, not silent data.
#pragma once
#include "ops/fused.hpp"

#include <kiln/shape.hpp>

#include <string>
#include <vector>

namespace kiln::gpu::codegen {

// Whether `body` is a data-movement body this generator writes for these shapes.
bool is_move(const op::fused& body, const std::vector<shape>& inputs);
// One kernel named `name`; `output` is the (standard) output buffer's shape.
std::string emit_move_kernel(const op::fused& body, const std::vector<shape>& inputs, const shape& output,
                             const std::string& name);
// The kernel's symbol, derived from its source like kernel_symbol's.
std::string move_symbol(const op::fused& body, const std::vector<shape>& inputs, const shape& output);
// Blocks to launch for `elements` output elements (grid_size's rule).
unsigned move_grid(std::size_t elements);

}  // namespace kiln::gpu::codegen
