// The deployment guide's worker pattern, with Kiln's C++ API: load a compiled `.kiln` once, let N
// workers take requests from a queue, and swap in a freshly loaded model while requests run
// (the hot update), without failing or reordering any request.
//
//     serve_worker resnet50.onnx|resnet50.kiln [--workers 2] [--requests 64] [--swap-every-ms 200]
//
// Given an `.onnx`, it compiles it once for batch 1 and saves `<model>.kiln` beside it (compile
// once, load many); given a `.kiln`, it only loads. Every request's output is checked against a
// run made before the workers start: a swap must never change an answer. Exit 0 when every request
// succeeded and agreed.
#include <kiln/kiln.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace k = kiln::api;
using clock_type = std::chrono::steady_clock;

namespace {

// The model in service. Workers copy the pointer for one request; a swap replaces it, and the old
// program is freed when its last request ends.
class model_slot {
public:
    explicit model_slot(std::shared_ptr<const k::program> p) : current_(std::move(p)) {}
    std::shared_ptr<const k::program> get() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return current_;
    }
    void swap_in(std::shared_ptr<const k::program> p) {
        std::lock_guard<std::mutex> lock(mutex_);
        current_ = std::move(p);
    }

private:
    mutable std::mutex mutex_;
    std::shared_ptr<const k::program> current_;
};

// A closable queue of request numbers.
class request_queue {
public:
    void push(int r) {
        { std::lock_guard<std::mutex> lock(mutex_); items_.push_back(r); }
        ready_.notify_one();
    }
    void close() {
        { std::lock_guard<std::mutex> lock(mutex_); closed_ = true; }
        ready_.notify_all();
    }
    std::optional<int> pop() {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [&] { return closed_ || !items_.empty(); });
        if (items_.empty()) return std::nullopt;
        int r = items_.front();
        items_.pop_front();
        return r;
    }

private:
    std::mutex mutex_;
    std::condition_variable ready_;
    std::deque<int> items_;
    bool closed_ = false;
};

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A `.kiln` for the model: the given one, or one compiled from the `.onnx` and saved beside it.
std::string compiled_model(const std::string& path) {
    if (ends_with(path, ".kiln")) return path;
    k::program p = k::parse_onnx(path, k::onnx_options().input_dims("input", {1, 3, 224, 224}));
    p.compile(k::target("cpu"), k::compile_options().offload_copy(true));
    std::string out = path + ".kiln";
    p.save(out);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    std::string model_path;
    int workers = 2, requests = 64, swap_every_ms = 200;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
        if (a == "--workers") workers = next();
        else if (a == "--requests") requests = next();
        else if (a == "--swap-every-ms") swap_every_ms = next();
        else model_path = a;
    }
    if (model_path.empty() || workers < 1 || requests < 1 || swap_every_ms < 1) {
        std::fprintf(stderr, "usage: serve_worker model.onnx|model.kiln [--workers N] [--requests N] [--swap-every-ms N]\n");
        return 2;
    }
    try {
        const std::string kiln_path = compiled_model(model_path);
        auto t0 = clock_type::now();
        model_slot slot(std::make_shared<const k::program>(k::load(kiln_path)));
        double load_ms = std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
        const std::string input = slot.get()->input_names().at(0);

        // A few distinct inputs, and the answer the first model gives for each.
        const int distinct = 4;
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> uniform(-1.f, 1.f);
        k::shape shape(KILN_TYPE_FLOAT32, {1, 3, 224, 224});
        std::vector<k::argument> inputs;
        std::vector<std::vector<float>> expected;
        for (int d = 0; d < distinct; ++d) {
            std::vector<float> x(shape.elements());
            for (auto& v : x) v = uniform(rng);
            inputs.emplace_back(shape, x);
            expected.push_back(slot.get()->run({{input, inputs.back()}}).at(0).to_vector<float>());
        }

        request_queue queue;
        std::atomic<int> failed{0}, done{0}, swaps{0};
        std::atomic<bool> stop_swapping{false};
        std::vector<double> latencies(requests);
        std::vector<std::thread> pool;
        for (int w = 0; w < workers; ++w)
            pool.emplace_back([&] {
                while (auto r = queue.pop()) {
                    auto start = clock_type::now();
                    try {
                        auto model = slot.get();  // this request's model, even if a swap comes now
                        auto out = model->run({{input, inputs[*r % distinct]}}).at(0).to_vector<float>();
                        const auto& want = expected[*r % distinct];
                        for (std::size_t i = 0; i < out.size(); ++i)
                            if (std::fabs(out[i] - want[i]) > 1e-5f * (1 + std::fabs(want[i]))) {
                                std::fprintf(stderr, "request %d: output %zu is %g, expected %g\n", *r, i, out[i], want[i]);
                                ++failed;
                                break;
                            }
                    } catch (const k::error& e) {
                        std::fprintf(stderr, "request %d failed: %s\n", *r, e.what());
                        ++failed;
                    }
                    latencies[*r] = std::chrono::duration<double, std::milli>(clock_type::now() - start).count();
                    ++done;
                }
            });
        // The hot update: load the model again beside the serving one, then swap.
        std::thread swapper([&] {
            while (!stop_swapping) {
                std::this_thread::sleep_for(std::chrono::milliseconds(swap_every_ms));
                if (stop_swapping) break;
                slot.swap_in(std::make_shared<const k::program>(k::load(kiln_path)));
                ++swaps;
            }
        });

        auto serve_start = clock_type::now();
        for (int r = 0; r < requests; ++r) queue.push(r);
        queue.close();
        for (auto& t : pool) t.join();
        double seconds = std::chrono::duration<double>(clock_type::now() - serve_start).count();
        stop_swapping = true;
        swapper.join();

        std::sort(latencies.begin(), latencies.end());
        std::printf("load %.0f ms; %d requests on %d workers: %d failed, %d swaps, p50 %.1f ms, p99 %.1f ms, %.1f requests/s\n",
                    load_ms, done.load(), workers, failed.load(), swaps.load(), latencies[latencies.size() / 2],
                    latencies[std::min(latencies.size() - 1, latencies.size() * 99 / 100)], done / seconds);
        return failed == 0 && done == requests ? 0 : 1;
    } catch (const k::error& e) {
        std::fprintf(stderr, "kiln error (status %d): %s\n", static_cast<int>(e.status()), e.what());
        return 1;
    }
}
