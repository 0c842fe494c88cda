// The C++ text of a fused group's values, shared by the targets that generate kernels
// (cpu: plain C++; gpu: CUDA C++ through NVRTC). Each node is one expression, the same
// as its op's scalar apply function in the same order and type (float). The text calls
// GCC's __builtin_* math functions and the helpers of fast_math.hpp (kiln_max, kiln_fexp,
// ...): the cpu compiles it as it is; the gpu renames __builtin_X to kiln_X, which its
// device header defines (src/targets/gpu/codegen/device_header.cpp).
#pragma once
#include "codegen/plan.hpp"

#include <string>

namespace kiln::codegen {

// The expression computing node k of p from its arguments (variables v<arg>).
std::string node_expression(const plan& p, std::size_t k);
// A constant node's value as an exact literal of its value_type.
std::string constant_literal(const node& n);
// The C type holding a node's value (16-bit float constants are held as double).
std::string value_type(const node& n);
// The C type of an element type ("float", "long long", ...; float16/bfloat16: the gpu
// device header's storage structs kiln_half/kiln_bf16).
std::string c_type(type t);

}  // namespace kiln::codegen
