// Execution state of the gpu target: the options a program compiles with, and once the
// program meets a device (finalize or the first run), the device itself: cudaSetDevice
// (device_id), one CUDA stream, the cuBLASLt handle and the CUDA libraries (the modules'
// generated kernels, loaded with cudaLibraryLoadData). Nothing here touches CUDA until it
// is asked to, so programs compile and load (finalize) on machines without a device;
// begin_run refuses to run there, saying why.
//
// The CUDA types are only forward declared here: headers that include this one (tests,
// the kernels' headers) need no CUDA include path.
#pragma once
#include "targets/gpu/eval_graphs.hpp"
#include "targets/gpu/gpu_options.hpp"

#include <kiln/argument.hpp>
#include <kiln/context.hpp>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>

struct CUstream_st;
struct CUevent_st;
struct CUlib_st;
struct cublasLtContext;
struct cudnnContext;

namespace kiln::gpu {

// One module's generated kernels as loaded on the device, and how ("cubin for sm_90",
// "recompiled for sm_100 from the kept source", "PTX (JIT by the driver)").
struct loaded_library {
    CUlib_st* handle = nullptr;
    std::string how;
    // It holds gather kernels: finish reads its kiln_error_ (codegen/emit_move.hpp).
    std::atomic<bool> reports_errors{false};
    ~loaded_library();
};

class gpu_context final : public context {
public:
    explicit gpu_context(const compile_options& opts) : options_(read_gpu_options(opts)) {}
    ~gpu_context() override;
    std::string target_name() const override { return "gpu"; }
    // Refuses to run where there is no device (unavailable_reason); else makes the
    // device current on the calling thread and sets up the stream and handles. The token
    // counts the eval as in flight; while one eval records a CUDA graph on the shared
    // stream, another waits here (its copies would join the recording). With offload_copy
    // off, the eval's work is ordered after the legacy default stream, where the caller's
    // device inputs are ready (torch's default stream; DLPack's stream=1).
    std::shared_ptr<void> begin_run() override;
    // Waits for the stream (nothing to wait for before the device was set up), then raises
    // a runtime error when a gather kernel met an out-of-range index (and clears the record).
    void finish() override;
    const gpu_options& options() const { return options_; }
    // CUDA graphs (eval_graphs.hpp) unless KILN_GPU_GRAPHS=0.
    bool records_evals() const override { return options_.graphs; }
    std::vector<argument> run_eval(const std::string& key, const std::function<std::vector<argument>()>& enqueue) override;
    graph_stats graph_statistics() const { return graphs_.stats(); }
    // offload_copy's input `name` for the eval holding the arena at `arena`: copied into
    // a pinned host buffer, then queued (cudaMemcpyAsync, no wait) into a device buffer
    // kept for that (arena, input): the same address every eval, as a graph replay needs.
    argument staged_input(const std::string& name, const argument& host, const void* arena);

    // Whether this machine has a usable device (unavailable_reason() is "").
    static bool has_device();
    // The device, current on the calling thread, its stream and handles created on first
    // use. Throws a runtime error naming the CUDA call that failed. Cheap once set up: the
    // device is set again only when this thread last set another one through a gpu_context,
    // or with force_set (begin_run at every eval, finalize, arena and literal allocations:
    // the caller may have changed it).
    void use_device(bool force_set = false);
    CUstream_st* stream();
    // The stream, shared: buffers of an eval freed on it (cudaFreeAsync) may outlive this
    // context (results handed to the caller), and keep the stream until they go.
    std::shared_ptr<CUstream_st> shared_stream();
    cublasLtContext* lt_handle();
    // cuDNN's handle on the stream, made on first use (cudnnCreate loads cuDNN's kernels:
    // programs without convolutions never pay for it). One run at a time uses it: callers
    // hold cudnn_mutex() around execution.
    cudnnContext* cudnn_handle();
    std::mutex& cudnn_mutex() { return cudnn_mutex_; }
    // The device's architecture, "sm_90" (from its compute capability).
    std::string device_arch();

    // The library of compiled kernels with NVRTC key `key`: loaded once from `cubin`
    // when `arch` is the device's, else recompiled from `source` for the device's arch
    // (through the NVRTC cache), else from `ptx`. Empty code: only a lookup (a module's
    // other kernels name the first one's library by key); null when it is not loaded.
    std::shared_ptr<loaded_library> library(const std::string& key, const std::string& arch, const std::string& cubin,
                                            const std::string& ptx, const std::string& source, bool fast_math);

private:
    void setup_locked();
    gpu_options options_;
    std::mutex mutex_;
    std::atomic<bool> ready_{false};
    std::shared_ptr<CUstream_st> stream_;
    cublasLtContext* lt_ = nullptr;
    cudnnContext* cudnn_ = nullptr;
    std::mutex cudnn_mutex_;
    std::string arch_;
    std::map<std::string, std::shared_ptr<loaded_library>> libraries_;
    struct input_slot {
        std::shared_ptr<char> pinned, device;
        std::size_t bytes = 0;
    };
    std::map<std::pair<const void*, std::string>, input_slot> input_slots_;  // under mutex_
    eval_graphs graphs_;
    CUevent_st* legacy_ready_ = nullptr;  // under mutex_ when made
    std::mutex evals_mutex_;
    std::condition_variable evals_changed_;
    std::size_t evals_in_flight_ = 0;
    bool recording_ = false;
};

// gpu_context of `ctx`, or a runtime error naming `what` (a gpu kernel run with another
// target's context).
gpu_context& gpu_context_of(context& ctx, const char* what);

}  // namespace kiln::gpu
