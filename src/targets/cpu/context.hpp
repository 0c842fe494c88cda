// Execution state of the cpu target: the oneDNN engine and stream, and the number of
// worker threads. Kernels (oneDNN's and Kiln's generated ones) run on one OpenMP pool;
// a process-wide core lease keeps concurrent evals from oversubscribing the cores.
#pragma once
#include <kiln/compile_options.hpp>
#include <kiln/context.hpp>

#include <dnnl.hpp>

#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace kiln::cpu {

// Threads to use: compile_options::threads, else KILN_NUM_THREADS, else the cores
// this process may run on.
std::size_t default_thread_count(std::size_t requested);

class cpu_context final : public context {
public:
    explicit cpu_context(const compile_options& opts);
    std::string target_name() const override { return "cpu"; }

    std::size_t threads() const { return threads_; }
    bool fast_math() const { return fast_math_; }
    dnnl::engine& engine() { return engine_; }
    // A stream for the calling thread's eval (oneDNN streams are not shared across
    // threads that execute concurrently).
    dnnl::stream make_stream();
    // The calling thread's stream on this context's engine, created on first use.
    dnnl::stream& stream();
    std::shared_ptr<void> begin_run() override;

private:
    std::size_t threads_;
    bool fast_math_;
    dnnl::engine engine_;
    std::mutex streams_mutex_;
    std::unordered_map<std::thread::id, dnnl::stream> streams_;
};

// Holds the machine's worker threads for the duration of one eval: a second eval
// running at the same time waits rather than splitting the cores into thrashing teams.
class core_lease {
public:
    explicit core_lease(std::size_t threads);
    ~core_lease();
    core_lease(const core_lease&) = delete;
    core_lease& operator=(const core_lease&) = delete;

private:
    std::size_t threads_;
};

}  // namespace kiln::cpu
