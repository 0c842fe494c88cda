#include "targets/gpu/context.hpp"

#include "targets/gpu/availability.hpp"
#include "targets/gpu/codegen/nvrtc.hpp"
#include "targets/gpu/device.hpp"

#include <kiln/errors.hpp>

#include <cublasLt.h>
#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <utility>
#include <vector>

namespace kiln::gpu {

loaded_library::~loaded_library() {
    if (handle) (void)cudaLibraryUnload(handle);
}

gpu_context::~gpu_context() {
    // The libraries, handle and stream belong to this context; a failure here has no one
    // to report to (the process may be exiting), so statuses are ignored.
    libraries_.clear();
    if (lt_) (void)cublasLtDestroy(lt_);
    if (cudnn_) (void)cudnnDestroy(cudnn_);
    if (legacy_ready_) (void)cudaEventDestroy(legacy_ready_);
    stream_.reset();  // destroyed when the last buffer freed on it goes too
}

bool gpu_context::has_device() { return unavailable_reason().empty(); }

std::shared_ptr<void> gpu_context::begin_run() {
    if (auto why = unavailable_reason(); !why.empty())
        throw_error(error_code::unsupported, "target gpu is not available: " + why);
    use_device(true);
    if (!options_.offload_copy) {
        // This context's stream is non-blocking, so it does not follow the legacy default
        // stream by itself: wait there for what was queued before this eval.
        cudaStream_t s = stream();
        cudaEvent_t ready = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (!legacy_ready_)
                check_cuda(cudaEventCreateWithFlags(&legacy_ready_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
            ready = legacy_ready_;
        }
        check_cuda(cudaEventRecord(ready, cudaStreamLegacy), "cudaEventRecord on the legacy default stream");
        check_cuda(cudaStreamWaitEvent(s, ready, 0), "cudaStreamWaitEvent (the caller's inputs)");
    }
    std::unique_lock<std::mutex> lock(evals_mutex_);
    evals_changed_.wait(lock, [&] { return !recording_; });
    ++evals_in_flight_;
    return std::shared_ptr<void>(this, [](gpu_context* g) {
        std::lock_guard<std::mutex> done(g->evals_mutex_);
        --g->evals_in_flight_;
        g->evals_changed_.notify_all();
    });
}

void gpu_context::setup_locked() {
    if (ready_.load()) return;
    int count = 0;
    check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
    if (options_.device_id >= count)
        throw_error(error_code::invalid_argument, "gpu: device_id " + std::to_string(options_.device_id) +
                                                      " does not exist (this machine has " + std::to_string(count) +
                                                      " CUDA device" + (count == 1 ? "" : "s") + ")");
    check_cuda(cudaSetDevice(options_.device_id), "cudaSetDevice(" + std::to_string(options_.device_id) + ")");
    int major = 0, minor = 0;
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, options_.device_id),
               "cudaDeviceGetAttribute(compute capability)");
    check_cuda(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, options_.device_id),
               "cudaDeviceGetAttribute(compute capability)");
    arch_ = "sm_" + std::to_string(major * 10 + minor);
    cudaStream_t s = nullptr;
    check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    stream_ = std::shared_ptr<CUstream_st>(s, [](cudaStream_t x) { (void)cudaStreamDestroy(x); });
    cublasLtHandle_t h = nullptr;
    check_cublas(cublasLtCreate(&h), "cublasLtCreate");
    lt_ = h;
    ready_.store(true, std::memory_order_release);
}

namespace {
// The device this thread last made current through a gpu_context (-1: unknown).
thread_local int current_device = -1;
}  // namespace

void gpu_context::use_device(bool force_set) {
    if (!ready_.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(mutex_);
        setup_locked();
        current_device = -1;  // setup set it without the cache: set it again below
    }
    // The current device is per host thread: set it for this one.
    int& current = current_device;
    if (force_set || current != options_.device_id) {
        check_cuda(cudaSetDevice(options_.device_id), "cudaSetDevice(" + std::to_string(options_.device_id) + ")");
        current = options_.device_id;
    }
}

CUstream_st* gpu_context::stream() {
    use_device();
    return stream_.get();
}

std::shared_ptr<CUstream_st> gpu_context::shared_stream() {
    use_device();
    return stream_;
}

cublasLtContext* gpu_context::lt_handle() {
    use_device();
    return lt_;
}

cudnnContext* gpu_context::cudnn_handle() {
    use_device();
    std::lock_guard<std::mutex> lock(mutex_);
    if (!cudnn_) {
        cudnnHandle_t h = nullptr;
        const cudnnStatus_t s = cudnnCreate(&h);
        if (s != CUDNN_STATUS_SUCCESS)
            throw_error(error_code::runtime, std::string("gpu: cudnnCreate failed: ") + cudnnGetErrorString(s));
        const cudnnStatus_t t = cudnnSetStream(h, stream_.get());
        if (t != CUDNN_STATUS_SUCCESS) {
            (void)cudnnDestroy(h);
            throw_error(error_code::runtime, std::string("gpu: cudnnSetStream failed: ") + cudnnGetErrorString(t));
        }
        cudnn_ = h;
    }
    return cudnn_;
}

std::string gpu_context::device_arch() {
    use_device(true);
    return arch_;
}

void gpu_context::finish() {
    CUstream_st* s = nullptr;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!ready_.load()) return;
        s = stream_.get();
    }
    check_cuda(cudaStreamSynchronize(s), "cudaStreamSynchronize (the eval's queued work)");
    std::vector<std::pair<std::string, std::shared_ptr<loaded_library>>> watched;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [key, lib] : libraries_)
            if (lib->reports_errors.load()) watched.emplace_back(key, lib);
    }
    for (const auto& [key, lib] : watched) {
        void* flag = nullptr;
        std::size_t bytes = 0;
        check_cuda(cudaLibraryGetGlobal(&flag, &bytes, lib->handle, "kiln_error_"),
                   "cudaLibraryGetGlobal(kiln_error_) in library " + key);
        unsigned long long e[3] = {0, 0, 0};
        check_cuda(cudaMemcpy(e, flag, sizeof e, cudaMemcpyDeviceToHost), "reading the gather error record");
        if (e[0] == 0) continue;
        check_cuda(cudaMemset(flag, 0, sizeof e), "clearing the gather error record");
        const auto n = static_cast<long long>(e[2]);
        throw_error(error_code::runtime, "gpu: a gather kernel (library " + key + ") met index " +
                                             std::to_string(static_cast<long long>(e[1])) +
                                             ", out of range for an axis of " + std::to_string(n) +
                                             " elements (valid: " + std::to_string(-n) + " to " + std::to_string(n - 1) +
                                             "); the results of this eval are not valid");
    }
}

namespace {

// cudaLibraryLoadData of CUBIN or NUL-terminated PTX.
CUlib_st* load(const std::string& code, const std::string& what) {
    cudaLibrary_t lib = nullptr;
    check_cuda(cudaLibraryLoadData(&lib, code.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0),
               "cudaLibraryLoadData of " + what);
    return lib;
}

}  // namespace

std::shared_ptr<loaded_library> gpu_context::library(const std::string& key, const std::string& arch,
                                                     const std::string& cubin, const std::string& ptx,
                                                     const std::string& source, bool fast_math) {
    const std::string device = device_arch();
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = libraries_.find(key); it != libraries_.end()) return it->second;
    if (cubin.empty() && ptx.empty() && source.empty()) return nullptr;
    auto lib = std::make_shared<loaded_library>();
    std::string failures;
    if (!cubin.empty() && arch == device) {
        lib->handle = load(cubin, "the CUBIN for " + arch + " (library " + key + ")");
        lib->how = "CUBIN for " + arch;
    } else {
        // Another architecture: NVRTC again for this one (through the cache), else the PTX.
        if (!source.empty()) {
            try {
                const auto built = codegen::compile_cuda(source, device, fast_math, options_.cache_dir);
                lib->handle = load(built.cubin, "the CUBIN recompiled for " + device + " (library " + key + ")");
                lib->how = "recompiled for " + device + " (compiled for " + arch + ")";
            } catch (const error& e) {
                failures = e.message();
            }
        }
        if (!lib->handle && !ptx.empty()) {
            std::string text = ptx;
            while (!text.empty() && text.back() == '\0') text.pop_back();
            try {
                lib->handle = load(text, "the PTX of " + arch + " on a " + device + " device (library " + key + ")");
                lib->how = "PTX of " + arch + " (JIT for " + device + ")";
            } catch (const error& e) {
                failures += (failures.empty() ? "" : "; ") + e.message();
            }
        }
        if (!lib->handle)
            throw_error(error_code::runtime, "gpu: the generated kernels (library " + key + ") were compiled for " +
                                                 arch + ", the device is " + device + ", and neither recompiling nor " +
                                                 "the PTX worked: " + failures);
    }
    libraries_[key] = lib;
    return lib;
}

std::vector<argument> gpu_context::run_eval(const std::string& key,
                                            const std::function<std::vector<argument>()>& enqueue) {
    // Recording needs the stream to itself: only when this is the one eval in flight, and
    // evals that begin meanwhile wait in begin_run until it is done.
    auto may_record = [&] {
        std::lock_guard<std::mutex> lock(evals_mutex_);
        if (evals_in_flight_ != 1) return false;
        recording_ = true;
        return true;
    };
    auto recorded = [&] {
        std::lock_guard<std::mutex> lock(evals_mutex_);
        recording_ = false;
        evals_changed_.notify_all();
    };
    return graphs_.run(key, stream(), enqueue, may_record, recorded);
}

argument gpu_context::staged_input(const std::string& name, const argument& host, const void* arena) {
    const std::size_t bytes = span_bytes(host.get_shape());
    cudaStream_t s = stream();
    input_slot* slot = nullptr;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        slot = &input_slots_[{arena, name}];
        if (slot->bytes < bytes) {
            // The arena is this eval's alone until it ends, and with it this slot: no other
            // eval's copy can still be reading the old buffers.
            void* pinned = nullptr;
            check_cuda(cudaMallocHost(&pinned, bytes), "cudaMallocHost of " + std::to_string(bytes) +
                                                           " bytes (staging for input '" + name + "')");
            slot->pinned = std::shared_ptr<char>(static_cast<char*>(pinned), [](char* p) { (void)cudaFreeHost(p); });
            slot->device = device_allocate(host.get_shape(), *this, "input '" + name + "'").buffer();
            slot->bytes = bytes;
        }
    }
    if (bytes) {
        std::memcpy(slot->pinned.get(), host.data(), bytes);
        check_cuda(cudaMemcpyAsync(slot->device.get(), slot->pinned.get(), bytes, cudaMemcpyHostToDevice, s),
                   "cudaMemcpyAsync (host to device) for input '" + name + "'");
    }
    return argument(host.get_shape(), slot->device);
}

gpu_context& gpu_context_of(context& ctx, const char* what) {
    auto* g = dynamic_cast<gpu_context*>(&ctx);
    if (!g) throw_error(error_code::runtime, std::string(what) + ": runs only with the gpu target's context, got " + ctx.target_name());
    return *g;
}

}  // namespace kiln::gpu
