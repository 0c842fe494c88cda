// Device memory for the gpu target, through the CUDA runtime API only: buffers as
// arguments (memory_location::device, freed when their last view goes), copies on the
// context's stream, and the checks that turn a CUDA or cuBLAS status into a kiln error
// naming what failed ("gpu: cudaMemcpyAsync for input 'x' failed: <CUDA's message>").
#pragma once
#include "targets/gpu/context.hpp"

#include <kiln/argument.hpp>

#include <string>

namespace kiln::gpu {

// Throws error_code::runtime "gpu: <what> failed: <cudaGetErrorString>" unless `status`
// (a cudaError_t) is cudaSuccess.
void check_cuda(int status, const std::string& what);
// The same for a cublasStatus_t ("<cublasLtGetStatusString>").
void check_cublas(int status, const std::string& what);

// Bytes an argument of shape `s` spans (its strides included); 0 for non-tensors.
std::size_t span_bytes(const shape& s);

// A device buffer for `s` (its whole span), freed with cudaFree when the last argument
// viewing it goes. cudaMalloc: for arenas and literals, made once.
argument device_allocate(const shape& s, gpu_context& ctx, const std::string& what);
// The same, stream-ordered (cudaMallocAsync / cudaFreeAsync on the context's stream): for
// buffers of one eval (inputs copied in, results copied out of the arena).
argument device_allocate_async(const shape& s, gpu_context& ctx, const std::string& what);

// Host -> device: a new device buffer of the argument's shape and layout (cudaMalloc when
// `once`, else stream-ordered); returns when the copy is done.
argument upload(const argument& host, gpu_context& ctx, const std::string& what, bool once = false);
// Device -> host: a new host buffer of the argument's shape and layout; waits for it.
argument download(const argument& device, gpu_context& ctx, const std::string& what);
// Device -> device: a new device buffer (stream-ordered).
argument device_copy(const argument& device, gpu_context& ctx, const std::string& what);
// Host bytes into an existing device buffer of the same span (`dest` device, `src` host),
// queued on the stream: `src` must live until the stream has done it (finish()).
void upload_into(const argument& src, const argument& dest, gpu_context& ctx, const std::string& what);

}  // namespace kiln::gpu
