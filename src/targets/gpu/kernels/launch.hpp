// How a generated kernel is called (codegen/emit.hpp: `extern "C" __global__ void
// NAME(const kiln_args a)`): one parameter, kiln_device.h's kiln_args by value, the
// inputs' device addresses in order and the output's. kernel_args is its host twin (same
// members, same layout: the static_asserts below and tests/gpu check it), and pack_args
// fills it from a fused_kernel's arguments (inputs..., output buffer), refusing anything
// that is not device memory with a message naming the kernel and the argument.
#pragma once
#include <kiln/argument.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::gpu {

inline constexpr std::size_t max_kernel_inputs = 64;  // KILN_MAX_INPUTS of kiln_device.h

struct kernel_args {
    const void* in[max_kernel_inputs];
    void* out;
};
static_assert(sizeof(kernel_args) == (max_kernel_inputs + 1) * sizeof(void*), "kiln_args' layout");
static_assert(offsetof(kernel_args, out) == max_kernel_inputs * sizeof(void*), "kiln_args' layout");

// args: the kernel's inputs, then its output buffer (destination-passing style).
kernel_args pack_args(const std::vector<argument>& args, const std::string& kernel);

// A launch's shape: `grid` blocks of codegen::block_size threads, no dynamic shared memory.
struct launch_dims {
    unsigned grid = 1, block = 1;
};

}  // namespace kiln::gpu
