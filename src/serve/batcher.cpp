#include "serve/batcher.hpp"

#include "serve/errors.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kiln::serve {

namespace {

using clock_type = std::chrono::steady_clock;

std::uint64_t ns_between(clock_type::time_point a, clock_type::time_point b) {
    return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

// Requests join only when every input agrees in all dims but the first.
std::string key_of(const param_map& params) {
    std::vector<std::string> parts;
    for (auto& [name, a] : params) {
        std::string part = name + ":";
        const auto& lens = a.get_shape().lens();
        for (std::size_t i = 1; i < lens.size(); ++i) part += std::to_string(lens[i]) + ",";
        parts.push_back(std::move(part));
    }
    std::sort(parts.begin(), parts.end());
    std::string key;
    for (auto& p : parts) key += p + ";";
    return key;
}

// The rows of `a` from `first` (dim 0), `rows` of them, as a tensor of its own.
argument rows_of(const argument& a, std::size_t first, std::size_t rows, std::size_t total) {
    auto lens = a.get_shape().lens();
    const std::size_t row_bytes = total ? a.get_shape().bytes() / total : 0;
    lens[0] = rows;
    argument out{shape(a.get_shape().get_type(), lens)};
    if (rows) std::memcpy(out.data(), a.data() + first * row_bytes, rows * row_bytes);
    return out;
}

}  // namespace

batcher::batcher(const loaded_model& m) : model_(m) {
    for (std::size_t i = 0; i < std::max<std::size_t>(1, m.config.instance_count); ++i)
        workers_.emplace_back([this] { work(); });
}

batcher::~batcher() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
}

std::vector<argument> batcher::submit(param_map params) {
    auto p = std::make_unique<pending>();
    p->key = key_of(params);
    p->rows = params.begin()->second.get_shape().lens().at(0);
    for (auto& [name, a] : params)
        if (a.get_shape().lens().at(0) != p->rows) p->key += "alone:" + std::to_string(reinterpret_cast<std::uintptr_t>(p.get()));
    p->params = std::move(params);
    p->queued = clock_type::now();
    auto result = p->result.get_future();
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (model_.config.max_queue_size && queue_.size() >= model_.config.max_queue_size)
            fail(error_kind::unavailable, "model '" + model_.name + "': the queue is full (max_queue_size " +
                                              std::to_string(model_.config.max_queue_size) + ")");
        queue_.push_back(std::move(p));
    }
    cv_.notify_all();
    return result.get();
}

void batcher::work() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        auto batch = next_batch(lock);
        if (batch.empty()) continue;
        lock.unlock();
        run(batch);
        lock.lock();
    }
}

std::vector<std::unique_ptr<batcher::pending>> batcher::next_batch(std::unique_lock<std::mutex>& lock) {
    const auto& c = model_.config;
    for (;;) {
        if (queue_.empty()) return {};
        const auto key = queue_.front()->key;
        const auto deadline = queue_.front()->queued + std::chrono::microseconds(c.max_queue_delay_us);
        std::size_t rows = 0;
        for (auto& p : queue_)
            if (p->key == key && rows + p->rows <= c.max_batch_size) rows += p->rows;
        const bool full = rows >= c.max_batch_size;
        const bool preferred = std::find(c.preferred_batch_sizes.begin(), c.preferred_batch_sizes.end(), rows) !=
                               c.preferred_batch_sizes.end();
        if (full || preferred || stopping_ || clock_type::now() >= deadline) {
            std::vector<std::unique_ptr<pending>> batch;
            std::size_t taken = 0;
            for (auto it = queue_.begin(); it != queue_.end();) {
                if ((*it)->key == key && taken + (*it)->rows <= c.max_batch_size) {
                    taken += (*it)->rows;
                    batch.push_back(std::move(*it));
                    it = queue_.erase(it);
                } else {
                    ++it;
                }
            }
            return batch;
        }
        cv_.wait_until(lock, deadline);  // more requests may come, or the oldest's wait ends
    }
}

void batcher::run(std::vector<std::unique_ptr<pending>>& batch) {
    auto& stats = *model_.stats;
    const auto start = clock_type::now();
    for (auto& p : batch) stats.queue_ns += ns_between(p->queued, start);
    try {
        std::size_t total = 0;
        for (auto& p : batch) total += p->rows;
        param_map params;
        if (batch.size() == 1) {
            params = std::move(batch[0]->params);
        } else {
            // Inputs are standard (row-major) tensors, so joining along dim 0 appends bytes.
            for (auto& [name, first] : batch[0]->params) {
                auto lens = first.get_shape().lens();
                lens[0] = total;
                argument joined{shape(first.get_shape().get_type(), lens)};
                std::size_t offset = 0;
                for (auto& p : batch) {
                    const auto& a = p->params.at(name);
                    std::memcpy(joined.data() + offset, a.data(), a.get_shape().bytes());
                    offset += a.get_shape().bytes();
                }
                params[name] = std::move(joined);
            }
        }
        const auto computing = clock_type::now();
        auto results = model_.prog->eval(params);
        stats.compute_infer_ns += ns_between(computing, clock_type::now());
        stats.exec_count++;
        if (batch.size() == 1) {
            batch[0]->result.set_value(std::move(results));
            return;
        }
        std::vector<std::vector<argument>> split(batch.size());
        for (std::size_t i = 0; i < results.size(); ++i) {
            auto a = results[i].contiguous();
            if (a.get_shape().lens().empty() || a.get_shape().lens()[0] != total)
                fail(error_kind::internal, "model '" + model_.name + "': output " + std::to_string(i) +
                                               " is not batched along dim 0; dynamic_batching does not fit this model");
            std::size_t first = 0;
            for (std::size_t k = 0; k < batch.size(); ++k) {
                split[k].push_back(rows_of(a, first, batch[k]->rows, total));
                first += batch[k]->rows;
            }
        }
        for (std::size_t k = 0; k < batch.size(); ++k) batch[k]->result.set_value(std::move(split[k]));
    } catch (...) {
        for (auto& p : batch) {
            try {
                p->result.set_exception(std::current_exception());
            } catch (const std::future_error&) {
                // this one was answered already
            }
        }
    }
}

}  // namespace kiln::serve
