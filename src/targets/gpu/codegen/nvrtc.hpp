// Generated CUDA C++ to machine code with NVRTC, which needs no device: CUBIN for one
// real architecture (sm_90) and its PTX (which the driver can JIT for newer GPUs), in one
// NVRTC run per module, with ptxas's resource report (-Xptxas=-v) kept and parsed, so that
// a kernel that spills to local memory is caught when it is compiled, not measured later.
//
// Cache: results live in the cache folder (gpu_options::cache_dir) as <key>.cubin, .ptx,
// .ptxas (the log) and .sum (sizes and content hashes of the three; an entry that does not
// match its sum is ignored and rebuilt). The key hashes the source, the device header, the
// options, NVRTC's version and the arch. Files are written under temporary names and
// renamed, so concurrent processes never read half an entry.
#pragma once
#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::gpu::codegen {

// One function's line of ptxas's report.
struct ptxas_usage {
    std::string function;
    std::size_t stack = 0, spill_stores = 0, spill_loads = 0;
    bool spills() const { return spill_stores + spill_loads > 0; }
};
std::vector<ptxas_usage> parse_ptxas_log(const std::string& log);

struct nvrtc_result {
    std::string key;
    std::string cubin;  // for the arch
    std::string ptx;    // compute_<arch's number>
    std::string log;    // NVRTC's and ptxas's messages
    bool cached = false;
    std::vector<ptxas_usage> usage;
};

// NVRTC's options for `arch` ("sm_90"): -default-device (so the shared helpers, written
// without execution spaces, are device functions), C++17, ptxas's report, and without
// fast_math no contraction into FMA (the reference kernels' rounding).
std::vector<std::string> nvrtc_options(const std::string& arch, bool fast_math);
// "13.0".
std::string nvrtc_version();

// Compiles `source` (kiln_device.h is given to NVRTC by name); through the cache when
// cache_dir is not "". Throws a kiln runtime error with NVRTC's log when it fails.
nvrtc_result compile_cuda(const std::string& source, const std::string& arch, bool fast_math,
                          const std::string& cache_dir);

struct nvrtc_stats {
    std::atomic<std::size_t> compiles{0};
    std::atomic<std::size_t> cache_hits{0};
    std::atomic<std::size_t> cache_rejects{0};
};
nvrtc_stats& stats();

}  // namespace kiln::gpu::codegen
