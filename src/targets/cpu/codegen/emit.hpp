// C++ source for fused kernels. Every kernel has the C signature
//
//   void NAME(const void* const* in, void* out, long begin, long end)
//
// and computes work units [begin, end) of its plan (elements or rows, see plan.hpp), so
// that Kiln can call it in parallel chunks. The source holds no intrinsics and includes
// nothing: loops are written for GCC's vectorizer (`#pragma omp simd`, restrict pointers,
// constant lens and strides), so one source serves every ISA level.
//
// Each node is one expression, the same as the op's scalar apply function in the same
// order and type (float), so with fast_math off and -ffp-contract=off a kernel gives
// the reference kernels' results bit for bit (reductions aside: they add in a different
// order). With fast_math on, exp, erf, tanh and sigmoid use the approximations of
// fast_math.hpp and division by a constant becomes a multiplication.
#pragma once
#include "targets/cpu/codegen/shared.hpp"

#include <cstdint>

#include <string>
#include <vector>

namespace kiln::cpu::codegen {

struct generic_layout;

// One kernel function named `name`.
std::string emit_kernel(const plan& p, const std::string& name);
// The kernel's symbol: derived from its source, so equal groups share one function.
std::string kernel_symbol(const plan& p);
// A generic program's elementwise kernel (generic_layout.hpp): the nodes of `p` (a
// sample_plan) over the layout's groups, with the signature
//
//   void NAME(const void* const* in, void* out, long begin, long end, const long* geometry)
//
// where begin and end count the result's elements (an elementwise group) or rows (a
// reduction group).
std::string emit_generic_kernel(const plan& p, const generic_layout& l, const std::string& name);
std::string generic_kernel_symbol(const plan& p, const generic_layout& l);
// A whole library: the helpers, then the kernels.
std::string library_source(const std::vector<std::string>& kernels);
// The helpers of generated kernels (codegen/fast_math.hpp) as source text.
const char* helpers_source();

}  // namespace kiln::cpu::codegen
