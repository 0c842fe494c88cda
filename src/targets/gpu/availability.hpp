// Whether this machine can run the gpu target, asked of the CUDA runtime API only (libcudart
// loads the driver itself; Kiln never links libcuda, so it starts on machines without one).
#pragma once
#include <string>

namespace kiln::gpu {

// "" when a CUDA device is usable; else "no CUDA driver" (none installed, or none the
// runtime can load) or "no CUDA device: <the runtime's error string>". Asked once per
// process: the answer does not change while it runs.
std::string unavailable_reason();

// The CUDA libraries this build runs on, with their versions ("cudart 13000, nvrtc 13.0,
// cublasLt 130100, cudnn 91900"): none of them needs a device to answer.
std::string library_versions();

}  // namespace kiln::gpu
