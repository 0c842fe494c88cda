// CUDA graphs for whole evals (gpu_context::run_eval). An eval's kernels, library calls and
// copies are queued on the context's one stream by the program's instructions; launching
// them one by one costs a few microseconds each on the host, which is most of a small
// model's time at batch 1 (bert_small: ~90 launches). So the second eval with the same key
// (program.cpp's eval_key: the arena's and every input's address and shape) is captured
// into a CUDA graph, and later evals with that key launch the graph instead: one launch.
// The first eval of a key runs plainly, so that what is set up once (libraries loaded,
// cuDNN plans, the cuDNN handle) is never captured.
//
// What cannot be recorded refuses (refuse_in_capture: a host kernel's copies to the
// host, per-eval allocations); the capture is then abandoned, the eval runs plainly, and
// the context stops trying (stats().off). Evals hold the cache's lock while they queue
// their work, and the context lets a capture start only while no other eval is in flight
// (gpu_context::begin_run holds new ones back meanwhile): the stream is shared, and another
// thread's copies queued on it would join the recording.
#pragma once
#include <kiln/argument.hpp>

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

struct CUstream_st;
struct CUgraphExec_st;

namespace kiln::gpu {

struct graph_stats {
    std::size_t plain = 0;     // evals that queued their work one by one
    std::size_t captured = 0;  // evals recorded into a graph (and launched)
    std::size_t replayed = 0;  // evals that launched a recorded graph
    std::string off;           // why this context stopped recording ("" while it may)
};

class eval_graphs {
public:
    eval_graphs() = default;
    eval_graphs(const eval_graphs&) = delete;
    eval_graphs& operator=(const eval_graphs&) = delete;
    ~eval_graphs();

    // One eval on `stream`: plainly, captured, or a replay (see above). A capture starts
    // only when `may_record()` says so (the stream is this eval's alone; it may be asked
    // again at a later eval), and `recorded()` is called when it has ended, either way.
    std::vector<argument> run(const std::string& key, CUstream_st* stream,
                              const std::function<std::vector<argument>()>& enqueue,
                              const std::function<bool()>& may_record, const std::function<void()>& recorded);
    graph_stats stats() const;

    // At most this many recorded keys; then they are dropped and recorded again as they
    // come (a caller passing fresh device buffers every eval makes a key per eval).
    static constexpr std::size_t max_entries = 64;

private:
    struct entry {
        std::size_t seen = 0;
        CUgraphExec_st* exec = nullptr;
        std::vector<argument> results;  // views of the arena (or of inputs), as the capture returned them
    };
    void clear_locked();
    mutable std::mutex mutex_;
    std::map<std::string, entry> entries_;
    graph_stats stats_;
};

// Throws error_code::unsupported ("gpu: <what> cannot be recorded in a CUDA graph") when
// `stream` is being captured: host round trips and allocations cannot be replayed.
void refuse_in_capture(CUstream_st* stream, const std::string& what);

}  // namespace kiln::gpu
