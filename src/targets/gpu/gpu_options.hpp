// Every switch of the gpu target, read in one place (read_gpu_options) from compile_options
// and the environment, as cpu_options is for the cpu target; docs/options.md lists them.
// A gpu_context keeps the options read when it was made, so a program compiles with the
// settings it started with.
#pragma once
#include <kiln/compile_options.hpp>

#include <string>

namespace kiln::gpu {

struct gpu_options {
    bool fast_math = true;      // compile_options::fast_math
    std::string arch;           // compile_options::gpu_arch, else KILN_GPU_ARCH, else sm_ + the build's first KILN_CUDA_ARCHS
    bool fusion = true;         // KILN_GPU_FUSION=0: no grouping (lone pointwise ops still get kernels)
    bool attention = true;      // KILN_GPU_ATTENTION=0: attention as cuBLASLt products and a softmax kernel, not fused
    bool lstm = true;           // KILN_GPU_LSTM=0: LSTMs on the host's reference kernel, not cuBLASLt + a generated recurrence
    bool cudnn = true;          // KILN_GPU_CUDNN=0: convolutions on the host's reference kernels, not cuDNN
    bool graphs = true;         // KILN_GPU_GRAPHS=0: every eval launches its work one by one (no CUDA graph replay)
    std::string cache_dir;      // KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln ("" none)
    bool codegen_verbose = false;  // KILN_CODEGEN_VERBOSE: each module's kernels and NVRTC time on stderr
    int device_id = 0;          // compile_options::device_id: the CUDA device the context runs on (cudaSetDevice)
    bool offload_copy = true;   // compile_options::offload_copy: host inputs/outputs copied (else device pointers)
    bool tf32 = false;          // compile_options::tf32: float32 products and convolutions may use TF32 tensor cores
};

gpu_options read_gpu_options(const compile_options& opts);

// Whether `arch` names a real architecture NVRTC can build CUBIN for ("sm_90", "sm_90a",
// "sm_100"); the gpu target refuses others.
bool valid_arch(const std::string& arch);

}  // namespace kiln::gpu
