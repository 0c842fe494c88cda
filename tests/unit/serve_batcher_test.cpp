// The dynamic batcher: concurrent requests joined along dim 0 into one eval and split
// back (each gets its own rows); requests with other dims in other batches; a full queue
// refused with 503; a preferred batch size runs without waiting out the delay.
#include "serve/infer.hpp"

#include <kiln/module_text.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

using namespace kiln::serve;

namespace {

// out = x + y for x, y: float32[batch 1..8, n 1..4].
std::shared_ptr<loaded_model> batched_add(model_config c) {
    auto p = kiln::parse_program(R"(module main
  x = @param -> float32[{batch=1:8:[1]}, {n=1:4:[1]}]
  y = @param -> float32[{batch=1:8:[1]}, {n=1:4:[1]}]
  @2 = add(x, y) -> float32[{batch=1:8:[1]}, {n=1:4:[1]}]
  @return(@2)
)");
    p.compile(*kiln::get_target("ref"));
    c.max_batch_size = 8;
    c.dynamic_batching = true;
    return std::make_shared<loaded_model>("add", 1, std::make_shared<const kiln::program>(std::move(p)), c,
                                          std::make_shared<model_stats>());
}

// x filled with `value`, y with 1: every output element is value + 1.
infer_request request(std::int64_t rows, std::int64_t n, float value) {
    infer_request r;
    r.model = "add";
    for (auto name : {"x", "y"}) {
        infer_input in;
        in.name = name;
        in.datatype = "FP32";
        in.shape = {rows, n};
        in.data.count = static_cast<std::size_t>(rows * n);
        const float v = std::string(name) == "x" ? value : 1.0f;
        in.data.fill = [v](const kiln::argument& dst) {
            for (std::size_t i = 0; i < dst.get_shape().elements(); ++i) dst.data_as<float>()[i] = v;
        };
        r.inputs.push_back(std::move(in));
    }
    return r;
}

// Runs the requests at once, each on its own thread; checks each got its own rows.
void run_together(const loaded_model& m, const std::vector<infer_request>& requests) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(requests.size());
    for (std::size_t k = 0; k < requests.size(); ++k)
        threads.emplace_back([&, k] {
            try {
                auto r = run(m, requests[k]);
                const auto& shape = requests[k].inputs[0].shape;
                auto expected = std::vector<float>(static_cast<std::size_t>(shape[0] * shape[1]), static_cast<float>(k) + 1);
                if (r.outputs[0].data.to_vector<float>() != expected) errors[k] = "wrong rows";
                if (r.outputs[0].shape != shape) errors[k] = "wrong shape";
            } catch (const std::exception& e) {
                errors[k] = e.what();
            }
        });
    for (auto& t : threads) t.join();
    for (std::size_t k = 0; k < errors.size(); ++k) EXPECT_EQ(errors[k], "") << "request " << k;
}

}  // namespace

TEST(serve_batcher, joins_concurrent_requests_and_splits_the_outputs) {
    model_config c;
    c.max_queue_delay_us = 300000;  // long enough for the four to meet
    auto m = batched_add(c);
    run_together(*m, {request(1, 3, 0), request(2, 3, 1), request(1, 3, 2), request(3, 3, 3)});
    EXPECT_EQ(m->stats->exec_count, 1u);
    EXPECT_EQ(m->stats->inference_count, 7u);
    EXPECT_EQ(m->stats->success, 4u);
}

TEST(serve_batcher, other_dims_go_to_other_batches) {
    model_config c;
    c.max_queue_delay_us = 300000;
    auto m = batched_add(c);
    run_together(*m, {request(1, 2, 0), request(1, 3, 1), request(2, 2, 2), request(1, 3, 3)});
    EXPECT_EQ(m->stats->exec_count, 2u);
}

TEST(serve_batcher, max_batch_size_splits_batches) {
    model_config c;
    c.max_queue_delay_us = 300000;
    auto m = batched_add(c);
    run_together(*m, {request(5, 1, 0), request(5, 1, 1)});  // 10 rows > 8: two runs
    EXPECT_EQ(m->stats->exec_count, 2u);
}

TEST(serve_batcher, a_full_queue_refuses_with_503) {
    model_config c;
    c.max_queue_delay_us = 500000;
    c.max_queue_size = 1;
    auto m = batched_add(c);
    std::thread first([&] { run(*m, request(1, 1, 0)); });
    while (m->stats->pending == 0) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // queued, waiting for company
    int status = 200;
    try {
        run(*m, request(1, 1, 1));
    } catch (const serve_error& e) {
        status = e.http_status();
    }
    first.join();
    EXPECT_EQ(status, 503);
    EXPECT_EQ(m->stats->success, 1u);
}

TEST(serve_batcher, a_preferred_size_runs_at_once) {
    model_config c;
    c.max_queue_delay_us = 20000000;  // 20 s: only the preferred size ends the wait
    c.preferred_batch_sizes = {2};
    auto m = batched_add(c);
    auto start = std::chrono::steady_clock::now();
    run_together(*m, {request(1, 2, 0), request(1, 2, 1)});
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
    EXPECT_EQ(m->stats->exec_count, 1u);
}
