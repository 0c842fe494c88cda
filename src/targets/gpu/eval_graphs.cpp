#include "targets/gpu/eval_graphs.hpp"

#include "targets/gpu/device.hpp"

#include <kiln/errors.hpp>

#include <cuda_runtime_api.h>

namespace kiln::gpu {

void refuse_in_capture(CUstream_st* stream, const std::string& what) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    check_cuda(cudaStreamIsCapturing(stream, &status), "cudaStreamIsCapturing");
    if (status != cudaStreamCaptureStatusNone)
        throw_error(error_code::unsupported, "gpu: " + what + " cannot be recorded in a CUDA graph");
}

eval_graphs::~eval_graphs() { clear_locked(); }

void eval_graphs::clear_locked() {
    // An executable graph still running is freed when it completes (cudaGraphExecDestroy).
    for (auto& [key, e] : entries_)
        if (e.exec) (void)cudaGraphExecDestroy(e.exec);
    entries_.clear();
}

graph_stats eval_graphs::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

namespace {

// Ends a capture that failed, whatever state it is in; the partial graph is dropped.
void abandon_capture(cudaStream_t stream) {
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(stream, &partial);
    if (partial) (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();  // the capture's failure is not the next call's
}

}  // namespace

std::vector<argument> eval_graphs::run(const std::string& key, CUstream_st* stream,
                                       const std::function<std::vector<argument>()>& enqueue,
                                       const std::function<bool()>& may_record, const std::function<void()>& recorded) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stats_.off.empty()) {
        ++stats_.plain;
        return enqueue();
    }
    auto it = entries_.find(key);
    if (it == entries_.end()) {
        if (entries_.size() >= max_entries) clear_locked();
        it = entries_.emplace(key, entry{}).first;
    }
    entry& e = it->second;
    if (e.exec) {
        check_cuda(cudaGraphLaunch(e.exec, stream), "cudaGraphLaunch (a recorded eval)");
        ++stats_.replayed;
        return e.results;
    }
    if (e.seen++ == 0 || !may_record()) {
        ++stats_.plain;
        return enqueue();
    }
    struct end_of_recording {
        const std::function<void()>& f;
        ~end_of_recording() { f(); }
    } end{recorded};
    // The second eval with this key: record it. Thread-local mode: another thread's
    // unrelated CUDA calls do not disturb the capture, and this thread's calls that cannot
    // be recorded fail (refuse_in_capture says so first where it can).
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    std::vector<argument> results;
    cudaGraph_t graph = nullptr;
    try {
        results = enqueue();
        check_cuda(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    } catch (const error& failure) {
        abandon_capture(stream);
        stats_.off = failure.message();
        entries_.erase(it);
        ++stats_.plain;
        return enqueue();  // the eval still runs; a genuine error shows again here
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    (void)cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
        (void)cudaGetLastError();
        stats_.off = std::string("cudaGraphInstantiate failed: ") + cudaGetErrorString(made);
        entries_.erase(it);
        ++stats_.plain;
        return enqueue();
    }
    e.exec = exec;
    e.results = results;
    check_cuda(cudaGraphLaunch(exec, stream), "cudaGraphLaunch (the eval just recorded)");
    ++stats_.captured;
    return results;
}

}  // namespace kiln::gpu
