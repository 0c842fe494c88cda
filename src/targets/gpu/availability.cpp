#include "targets/gpu/availability.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nvrtc.h>

namespace kiln::gpu {

namespace {

std::string probe() {
    // cudaDriverGetVersion reports 0 (not an error) when no driver is installed.
    int driver = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess || driver == 0) return "no CUDA driver";
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(e);
    if (count == 0) return std::string("no CUDA device: ") + cudaGetErrorString(cudaErrorNoDevice);
    return {};
}

}  // namespace

std::string unavailable_reason() {
    static const std::string why = probe();
    return why;
}

std::string library_versions() {
    int runtime = 0, nvrtc_major = 0, nvrtc_minor = 0;
    (void)cudaRuntimeGetVersion(&runtime);
    (void)nvrtcVersion(&nvrtc_major, &nvrtc_minor);
    return "cudart " + std::to_string(runtime) + ", nvrtc " + std::to_string(nvrtc_major) + "." +
           std::to_string(nvrtc_minor) + ", cublasLt " + std::to_string(cublasLtGetVersion()) + ", cudnn " +
           std::to_string(cudnnGetVersion());
}

}  // namespace kiln::gpu
