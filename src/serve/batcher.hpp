// The dynamic batcher of a model version (config.pbtxt dynamic_batching): requests whose
// inputs agree in every dim but the first wait in one queue and are joined along dim 0,
// up to max_batch_size, run as one eval, and get their rows of the outputs back.
//
// One worker thread per instance takes the oldest request and gathers the requests behind
// it with the same other dims until the batch is full, reaches a preferred size, or the
// oldest has waited max_queue_delay_microseconds. Requests with other dims wait for a
// later batch; a full queue (max_queue_size) refuses new requests with 503.
#pragma once
#include "serve/loaded_model.hpp"

#include <kiln/argument.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::serve {

class batcher {
public:
    // `m` must outlive the batcher (the loaded_model owns it).
    explicit batcher(const loaded_model& m);
    ~batcher();
    batcher(const batcher&) = delete;
    batcher& operator=(const batcher&) = delete;

    // Queues the request's (checked) inputs and waits for its outputs, in the program's
    // output order. Throws serve_error: unavailable when the queue is full.
    std::vector<argument> submit(param_map params);

private:
    struct pending {
        param_map params;
        std::string key;    // the inputs' names and dims after the first
        std::size_t rows = 0;
        std::chrono::steady_clock::time_point queued;
        std::promise<std::vector<argument>> result;
    };
    void work();
    std::vector<std::unique_ptr<pending>> next_batch(std::unique_lock<std::mutex>& lock);
    void run(std::vector<std::unique_ptr<pending>>& batch);

    const loaded_model& model_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<pending>> queue_;
    bool stopping_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace kiln::serve
