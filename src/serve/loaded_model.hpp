// One version of a model, compiled and ready: the program, its inputs and outputs as the
// protocol describes them, and the pool of instances that run it.
//
// Instances: program::eval may be called from several threads at once (each concurrent
// eval takes its own arena from the program's pool; weights and kernels are shared,
// read-only), so an instance is a slot, not a copy: `instance_count` evals of one program
// run at once, each with its own arena, and further requests wait for a slot (their queue
// time). The weights exist once however many instances there are.
#pragma once
#include "serve/model_config.hpp"

#include <kiln/program.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::serve {

struct tensor_spec {
    std::string name;
    type element_type = type::float32;
    std::vector<dynamic_dimension> dims;  // fixed dims have min == max
    bool optional = false;                // an input with a default value
    // The protocol's shape: -1 for a dim that is not fixed.
    std::vector<std::int64_t> protocol_shape() const;
};

// Cumulative counters of one model version (Triton's statistics extension and the
// Prometheus metrics). Kept by the repository across reloads so counters never go back.
struct model_stats {
    std::atomic<std::uint64_t> success{0}, failure{0};
    std::atomic<std::uint64_t> inference_count{0};  // inferences (a batch of 4 counts 4)
    std::atomic<std::uint64_t> exec_count{0};       // program runs
    std::atomic<std::uint64_t> success_ns{0}, failure_ns{0};
    std::atomic<std::uint64_t> queue_ns{0}, compute_input_ns{0}, compute_infer_ns{0}, compute_output_ns{0};
    std::atomic<std::uint64_t> last_inference_ms{0};  // since the epoch
    std::atomic<std::int64_t> pending{0};             // requests received, not yet answered
    std::atomic<std::uint64_t> loads{0};
    std::atomic<std::uint64_t> load_ns{0};            // of the latest load
    // Successful requests' durations: counts per bucket of latency_bounds_us (the last
    // bucket: above them all), the Prometheus histogram.
    static constexpr std::array<std::uint64_t, 14> latency_bounds_us = {
        100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000};
    std::array<std::atomic<std::uint64_t>, 15> latency_buckets{};
    void record_latency(std::uint64_t ns);
};

// A counting semaphore sized at run time.
class instance_pool {
public:
    explicit instance_pool(std::size_t count) : free_(count) {}
    class slot {
    public:
        explicit slot(instance_pool& p) : pool_(&p) {}
        slot(slot&& o) noexcept : pool_(o.pool_) { o.pool_ = nullptr; }
        slot(const slot&) = delete;
        ~slot() {
            if (pool_) pool_->release();
        }

    private:
        instance_pool* pool_;
    };
    slot acquire();

private:
    void release();
    std::mutex mutex_;
    std::condition_variable cv_;
    std::size_t free_;
};

class batcher;

struct loaded_model {
    std::string name;
    std::int64_t version = 1;
    std::shared_ptr<const program> prog;
    model_config config;
    std::vector<tensor_spec> inputs, outputs;
    std::shared_ptr<model_stats> stats;
    std::unique_ptr<instance_pool> instances;
    // model_warmup runs done before this version was made visible (ready only after them).
    std::size_t warmup_runs = 0;
    // With dynamic_batching: the queue whose workers (one per instance) run the batches.
    // Last, so that it stops before the rest goes.
    std::unique_ptr<batcher> batch_queue;

    loaded_model(std::string name, std::int64_t version, std::shared_ptr<const program> p, model_config c,
                 std::shared_ptr<model_stats> stats);
    ~loaded_model();
    const tensor_spec* find_input(const std::string& n) const;
    const tensor_spec* find_output(const std::string& n) const;
};

}  // namespace kiln::serve
