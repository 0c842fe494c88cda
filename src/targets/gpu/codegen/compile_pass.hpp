// gpu::compile_kernels: the module's generated kernels (gpu::fused_kernel) as one CUDA
// translation unit, compiled by NVRTC (through the cache) for the context's arch; the
// module's first kernel carries the source, CUBIN and PTX, every kernel the key. No
// device is needed, so `kiln compile --target gpu` works on a machine without one.
// KILN_CODEGEN_VERBOSE=1 prints each module's kernels, NVRTC time and any kernel that
// spills registers to local memory (tests/gpu requires none do).
#pragma once
#include "targets/gpu/gpu_options.hpp"

#include <kiln/module.hpp>

#include <string>
#include <vector>

namespace kiln::gpu::codegen {

// The module's kernels' source, each distinct kernel once, in a stable order.
std::string module_source(module& m);

struct compile_kernels {
    const gpu_options* options = nullptr;
    std::string name() const { return "gpu::compile_kernels"; }
    void apply(module& m) const;
};

}  // namespace kiln::gpu::codegen
