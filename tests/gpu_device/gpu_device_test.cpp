// GPU-only tests (kiln_gpu_device_tests): each skips with "no CUDA device: <CUDA error>"
// where there is none, and none may skip on a machine with a GPU. For now: the target is
// available there, and a generated kernel's CUBIN, loaded through the runtime API
// (cudaLibraryLoadData, never the driver API), computes what the reference computes.
#include "gpu/gpu_test_util.hpp"

#include "targets/gpu/availability.hpp"

#include <kiln/register_op.hpp>

#include <cuda_runtime_api.h>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

// The reason to skip, or "" on a machine with a device.
std::string no_device() {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(e);
    if (count == 0) return std::string("no CUDA device: ") + cudaGetErrorString(cudaErrorNoDevice);
    return {};
}

#define SKIP_WITHOUT_DEVICE()                                    \
    if (const auto why = no_device(); !why.empty()) GTEST_SKIP() << why

#define CUDA_OK(x) ASSERT_EQ((x), cudaSuccess) << #x << ": " << cudaGetErrorString(x)

}  // namespace

TEST(gpu_device, the_target_is_available) {
    SKIP_WITHOUT_DEVICE();
    EXPECT_EQ(get_target("gpu")->unavailable_reason(), "");
}

TEST(gpu_device, a_generated_kernel_runs_from_its_cubin) {
    SKIP_WITHOUT_DEVICE();
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {33, 1000}));
    auto b = m->add_parameter("b", shape(type::float32, {1000}));
    auto a = m->add_instruction(make_op("add"), {x, b});
    m->add_return({m->add_instruction(make_op("gelu"), {a})});
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto kernels = gpu_kernels(*m);
    ASSERT_EQ(kernels.size(), 1u);
    const auto& k = kernels[0]->get_operator().get<gpu::fused_kernel>();
    std::vector<argument> in = {random_tensor(x->get_shape(), 1), random_tensor(b->get_shape(), 2)};
    host_context ctx;
    const shape out_shape(type::float32, {33, 1000});
    const argument want = k.body.compute(ctx, out_shape, in);

    cudaLibrary_t lib = nullptr;
    CUDA_OK(cudaLibraryLoadData(&lib, k.cubin.get_binary().bytes.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    cudaKernel_t fn = nullptr;
    CUDA_OK(cudaLibraryGetKernel(&fn, lib, k.symbol.c_str()));
    kiln_args args{};
    std::vector<void*> device;
    for (auto& arg : in) {
        void* d = nullptr;
        CUDA_OK(cudaMalloc(&d, arg.get_shape().bytes()));
        CUDA_OK(cudaMemcpy(d, arg.data(), arg.get_shape().bytes(), cudaMemcpyHostToDevice));
        args.in[device.size()] = d;
        device.push_back(d);
    }
    void* out = nullptr;
    CUDA_OK(cudaMalloc(&out, out_shape.bytes()));
    args.out = out;
    void* params[] = {&args};
    CUDA_OK(cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(k.grid), dim3(gpu::codegen::block_size), params, 0,
                             nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    argument got(out_shape);
    CUDA_OK(cudaMemcpy(got.data(), out, out_shape.bytes(), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < out_shape.elements(); ++i)
        ASSERT_TRUE(nearly_equal(reinterpret_cast<const float*>(got.data())[i], reinterpret_cast<const float*>(want.data())[i]))
            << "element " << i;
    for (void* d : device) cudaFree(d);
    cudaFree(out);
    cudaLibraryUnload(lib);
}
