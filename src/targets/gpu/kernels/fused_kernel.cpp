#include "targets/gpu/kernels/fused_kernel.hpp"

#include "ops/tensor_gather.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/context.hpp"
#include "targets/gpu/device.hpp"
#include "targets/gpu/kernels/launch.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <cuda_runtime_api.h>

namespace kiln::gpu {

namespace {

std::string text_of(const value& v) {
    if (!v.is_binary()) return {};
    const auto& b = v.get_binary().bytes;
    return std::string(b.begin(), b.end());
}

}  // namespace

shape fused_kernel::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.empty()) throw_error(error_code::shape, "gpu::fused_kernel: missing its output buffer");
    std::vector<shape> in(inputs.begin(), inputs.end() - 1);
    auto s = body.compute_shape(in);
    if (!s.same_lens_and_type(inputs.back()))
        throw_error(error_code::shape, "gpu::fused_kernel: result " + s.to_string() + " does not fit its buffer " +
                                           inputs.back().to_string());
    return inputs.back();
}

namespace {

// Looks the kernel up in its library, loading the library from this op's code when it
// carries it. False when the library is not loaded yet and this op does not carry it.
bool resolve(const fused_kernel& k, gpu_context& g, kernel_handle& h) {
    if (h.kernel) return true;
    auto lib = g.library(k.library, k.arch, text_of(k.cubin), text_of(k.ptx), text_of(k.source), k.fast_math);
    if (!lib) return false;
    cudaKernel_t fn = nullptr;
    check_cuda(cudaLibraryGetKernel(&fn, lib->handle, k.symbol.c_str()),
               "cudaLibraryGetKernel(" + k.symbol + ") in library " + k.library + " (" + lib->how + ")");
    if (k.body.nodes.size() == 1 && k.body.nodes[0].op.any_cast<op::gather>()) lib->reports_errors.store(true);
    h.library = std::move(lib);
    h.kernel = fn;
    return true;
}

}  // namespace

void fused_kernel::finalize(context& ctx, const shape&, const std::vector<shape>&) {
    auto* g = dynamic_cast<gpu_context*>(&ctx);
    if (!g || !gpu_context::has_device()) return;  // compiled ahead: loaded where it runs
    if (library.empty())
        throw_error(error_code::runtime, "gpu::fused_kernel " + symbol + ": not compiled (gpu::compile_kernels did not run)");
    auto h = std::make_shared<kernel_handle>();
    (void)resolve(*this, *g, *h);
    loaded = std::move(h);
}

argument fused_kernel::compute(context& ctx, const shape& output, const std::vector<argument>& args) const {
    auto& g = gpu_context_of(ctx, "gpu::fused_kernel");
    if (!loaded)
        throw_error(error_code::runtime, "gpu::fused_kernel " + symbol +
                                             ": not loaded on a device (the program was finalized where there was "
                                             "no device; compile or load it on the machine that runs it)");
    CUkern_st* fn = nullptr;
    {
        std::lock_guard<std::mutex> lock(loaded->mutex);
        if (!resolve(*this, g, *loaded))
            throw_error(error_code::runtime, "gpu::fused_kernel " + symbol + ": its module's compiled kernels (library " +
                                                 library + ") are carried by no instruction of the program");
        fn = loaded->kernel;
    }
    kernel_args packed = pack_args(args, symbol);
    void* params[] = {&packed};
    const auto e = cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(grid), dim3(codegen::block_size), params, 0,
                                    g.stream());
    if (e != cudaSuccess)
        check_cuda(e, "cudaLaunchKernel of " + symbol + " (" + std::to_string(grid) + " blocks of " +
                          std::to_string(codegen::block_size) + " threads)");
    return args.back().reshape(output);
}

KILN_REGISTER_OP(fused_kernel)

}  // namespace kiln::gpu
