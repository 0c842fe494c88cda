// gpu::fused_kernel: one fused elementwise group (op::fused) as a generated CUDA kernel,
// in destination-passing style (the last input is the output buffer, placed by memory
// planning). The lowering gives it its body and symbol; compile_kernels (codegen/
// compile_pass.hpp) compiles the module's kernels in one NVRTC run and stores the result
// on the module's first fused_kernel: source, CUBIN for `arch` and PTX, so a saved program
// carries its machine code and loading compiles nothing; the others name it by key.
//
// Running one needs a device: finalize (at compile, and at load) loads the module's
// library through the runtime API (gpu_context::library: cudaLibraryLoadData of the CUBIN
// when the arch matches the device's, else NVRTC again from the kept source, else the PTX;
// never the driver API) and looks the kernel up (cudaLibraryGetKernel); compute launches
// it (cudaLaunchKernel of the cudaKernel_t) on the context's stream with `grid` blocks of
// codegen::block_size threads and the arguments packed as kiln_args (launch.hpp). Without
// a device finalize does nothing, and compute says why the kernel is not loaded.
#pragma once
#include "ops/fused.hpp"

#include <kiln/operation.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct CUkern_st;

namespace kiln::gpu {

struct loaded_library;

// A kernel found in its loaded library: made by finalize (shared by copies of the op),
// resolved there when its library is loaded already, else at the first launch (a module's
// kernels after scheduling need not come after the one carrying the code).
struct kernel_handle {
    std::mutex mutex;
    std::shared_ptr<loaded_library> library;
    CUkern_st* kernel = nullptr;
};

struct fused_kernel {
    op::fused body;
    bool fast_math = true;
    std::string symbol;   // the kernel's function in the module's CUBIN
    unsigned grid = 1;    // blocks per launch
    std::string library;  // the module's compiled kernels (nvrtc key)
    std::string arch;     // what `cubin` was built for ("sm_90")
    value source;         // binary: the module's CUDA source (first kernel of a module only)
    value cubin;          // binary: its machine code for arch (first kernel)
    value ptx;            // binary: its PTX (first kernel)
    std::shared_ptr<kernel_handle> loaded;  // on the device (not saved)
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.body, "body");
        f(self.fast_math, "fast_math");
        f(self.symbol, "symbol");
        f(self.grid, "grid");
        f(self.library, "library");
        f(self.arch, "arch");
        f(self.source, "source");
        f(self.cubin, "cubin");
        f(self.ptx, "ptx");
    }
    std::string name() const { return "gpu::fused_kernel"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& output, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

}  // namespace kiln::gpu
