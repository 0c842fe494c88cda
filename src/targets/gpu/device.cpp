#include "targets/gpu/device.hpp"

#include "core/device_memory.hpp"
#include "targets/gpu/eval_graphs.hpp"

#include <kiln/errors.hpp>

#include <cublasLt.h>
#include <cuda_runtime_api.h>

namespace kiln::gpu {

void check_cuda(int status, const std::string& what) {
    const auto e = static_cast<cudaError_t>(status);
    if (e == cudaSuccess) return;
    // Clear the runtime's sticky "last error" of a non-sticky failure, so the next call
    // reports its own status.
    (void)cudaGetLastError();
    throw_error(error_code::runtime, "gpu: " + what + " failed: " + cudaGetErrorString(e) + " (" +
                                         cudaGetErrorName(e) + ")");
}

void check_cublas(int status, const std::string& what) {
    const auto s = static_cast<cublasStatus_t>(status);
    if (s == CUBLAS_STATUS_SUCCESS) return;
    throw_error(error_code::runtime, "gpu: " + what + " failed: " + cublasLtGetStatusString(s));
}

std::size_t span_bytes(const shape& s) {
    if (!s.is_tensor() || s.dynamic()) return 0;
    return s.bytes();
}

namespace {

void require_tensor(const argument& a, const std::string& what) {
    const auto& s = a.get_shape();
    if (!s.is_tensor() || s.dynamic())
        throw_error(error_code::unsupported, "gpu: " + what + ": " + s.to_string() +
                                                 " is not a static tensor (tuples and sequences stay on the host)");
    if (s.get_type() == type::string)
        throw_error(error_code::unsupported, "gpu: " + what + ": string tensors have no device form");
}

}  // namespace

argument device_allocate(const shape& s, gpu_context& ctx, const std::string& what) {
    ctx.use_device(true);  // arenas and literals: not on the launch path
    const std::size_t bytes = span_bytes(s);
    void* p = nullptr;
    check_cuda(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)),
               "cudaMalloc of " + std::to_string(bytes) + " bytes for " + what);
    const int device = ctx.options().device_id;
    detail::device_memory_owner owner{device, [](char* q) { (void)cudaFree(q); }};
    return argument(s, std::shared_ptr<char>(static_cast<char*>(p), std::move(owner)));
}

argument device_allocate_async(const shape& s, gpu_context& ctx, const std::string& what) {
    auto stream = ctx.shared_stream();
    // A replay would hand out the recorded address again while the last eval's buffer may live on.
    refuse_in_capture(stream.get(), "the per-eval allocation of " + what);
    const std::size_t bytes = span_bytes(s);
    void* p = nullptr;
    check_cuda(cudaMallocAsync(&p, std::max<std::size_t>(bytes, 1), stream.get()),
               "cudaMallocAsync of " + std::to_string(bytes) + " bytes for " + what);
    const int device = ctx.options().device_id;
    // The buffer keeps the stream it is freed on (a result may outlive its program).
    detail::device_memory_owner owner{device, [stream](char* q) { (void)cudaFreeAsync(q, stream.get()); }};
    return argument(s, std::shared_ptr<char>(static_cast<char*>(p), std::move(owner)));
}

argument upload(const argument& host, gpu_context& ctx, const std::string& what, bool once) {
    require_tensor(host, what);
    if (host.location() != memory_location::host)
        throw_error(error_code::runtime, "gpu: " + what + ": already device memory");
    auto dev = once ? device_allocate(host.get_shape(), ctx, what) : device_allocate_async(host.get_shape(), ctx, what);
    upload_into(host, dev, ctx, what);
    // Pageable host memory may be read after the call returns, and the caller may drop
    // `host` once we return (and a literal's copy serves other threads' evals): wait.
    // (offload_copy's inputs take pinned staging instead: gpu_context::staged_input.)
    ctx.finish();
    return dev;
}

void upload_into(const argument& src, const argument& dest, gpu_context& ctx, const std::string& what) {
    const std::size_t bytes = span_bytes(src.get_shape());
    if (bytes == 0) return;
    if (span_bytes(dest.get_shape()) < bytes)
        throw_error(error_code::runtime, "gpu: " + what + ": " + std::to_string(bytes) + " bytes do not fit the device buffer " +
                                             dest.get_shape().to_string());
    check_cuda(cudaMemcpyAsync(dest.data(), src.data(), bytes, cudaMemcpyHostToDevice, ctx.stream()),
               "cudaMemcpyAsync (host to device) for " + what);
}

argument download(const argument& device, gpu_context& ctx, const std::string& what) {
    require_tensor(device, what);
    argument host(device.get_shape());
    const std::size_t bytes = span_bytes(device.get_shape());
    if (bytes == 0) return host;
    cudaStream_t stream = ctx.stream();
    refuse_in_capture(stream, "copying " + what + " to the host");
    check_cuda(cudaMemcpyAsync(host.data(), device.data(), bytes, cudaMemcpyDeviceToHost, stream),
               "cudaMemcpyAsync (device to host) for " + what);
    check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize after copying " + what + " to the host");
    return host;
}

argument device_copy(const argument& device, gpu_context& ctx, const std::string& what) {
    require_tensor(device, what);
    auto out = device_allocate_async(device.get_shape(), ctx, what);
    const std::size_t bytes = span_bytes(device.get_shape());
    if (bytes)
        check_cuda(cudaMemcpyAsync(out.data(), device.data(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()),
                   "cudaMemcpyAsync (device to device) for " + what);
    return out;
}

}  // namespace kiln::gpu
