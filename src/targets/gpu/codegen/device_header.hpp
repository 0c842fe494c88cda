// kiln_device.h, the one header generated gpu kernels include (NVRTC gets it as a named
// header; kernels include nothing from the CUDA toolkit), and the device source of a set
// of kernels.
//
// The node expressions (src/codegen/expr.cpp) and the helpers (src/codegen/fast_math.hpp)
// are shared with the cpu target and written with GCC's __builtin_* math names, which
// NVRTC does not know: device_source renames each __builtin_X to kiln_X, and the header
// defines kiln_X on the device (CUDA's math functions) and on the host (the builtin).
//
// The same source also compiles as host C++ (g++, no __CUDACC__): the header then
// supplies threadIdx, blockIdx, blockDim and gridDim as variables a caller sets with
// kiln_host_set_index before calling a kernel as a function, once per (block, thread), so
// tests run the generated arithmetic on the CPU without a device.
#pragma once
#include <string>
#include <vector>

namespace kiln::gpu::codegen {

// The header's name and text.
inline constexpr const char* device_header_name = "kiln_device.h";
const std::string& device_header();

// A whole translation unit: the header's include, the helpers, then the kernels
// (emit_kernel's text), with __builtin_X renamed to kiln_X.
std::string device_source(const std::vector<std::string>& kernels);

}  // namespace kiln::gpu::codegen
