// program::eval_into: outputs computed straight into the caller's buffers where the compiled
// program's output is a plain allocation and the buffer fits (aligned, row-major, same type and
// lens), else copied there; the numbers equal eval's either way.
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <thread>

using namespace kiln;

namespace {
const std::filesystem::path models = std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "data" / "models";

argument random_argument(const shape& s, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> v(s.elements());
    for (auto& x : v) x = u(rng);
    return literal(s, v).get_argument();
}

program compiled(const std::string& model, const std::string& target) {
    auto p = parse_onnx((models / model).string());
    p.compile(*get_target(target));
    return p;
}

param_map add_relu_inputs() {
    shape s(type::float32, {2, 3});
    return {{"x", random_argument(s, 1)}, {"y", random_argument(s, 2)}};
}
}  // namespace

TEST(core_eval_into, cpu_computes_into_an_aligned_buffer) {
    auto p = compiled("add_relu.onnx", "cpu");
    auto in = add_relu_inputs();
    auto want = p.eval(in).at(0);
    argument out(shape(type::float32, {2, 3}));  // Kiln's buffers are 64-byte aligned
    std::fill_n(out.data_as<float>(), 6, 7.f);
    EXPECT_EQ(p.eval_into(in, {out}), 1u) << p.to_string();
    EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>());
}

TEST(core_eval_into, unaligned_or_strided_buffers_get_a_copy) {
    auto p = compiled("add_relu.onnx", "cpu");
    auto in = add_relu_inputs();
    auto want = p.eval(in).at(0).to_vector<float>();
    argument big(shape(type::float32, {16}));
    auto unaligned = argument::borrow(shape(type::float32, {2, 3}), big.data() + 4);
    EXPECT_EQ(p.eval_into(in, {unaligned}), 0u);
    EXPECT_EQ(unaligned.to_vector<float>(), want);
    // A transposed view of a [3, 2] buffer is a [2, 3] tensor that is not row-major.
    argument t(shape(type::float32, {3, 2}));
    auto strided = argument::borrow(shape(type::float32, {2, 3}, {1, 2}), t.data());
    EXPECT_EQ(p.eval_into(in, {strided}), 0u);
    EXPECT_EQ(strided.to_vector<float>(), want);
}

TEST(core_eval_into, wrong_buffers_are_refused) {
    auto p = compiled("add_relu.onnx", "cpu");
    auto in = add_relu_inputs();
    try {
        p.eval_into(in, {argument(shape(type::float32, {3, 2}))});
        FAIL() << "no error for wrong lens";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
    }
    try {
        p.eval_into(in, {argument(shape(type::float64, {2, 3}))});
        FAIL() << "no error for a wrong type";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::type);
    }
    EXPECT_THROW(p.eval_into(in, {}), error);
}

TEST(core_eval_into, ref_and_dynamic_programs_give_eval_s_numbers) {
    for (const char* target : {"ref", "cpu"}) {
        auto p = compiled("mlp_dynamic.onnx", target);  // dynamic batch
        for (std::size_t batch : {1, 5, 5, 5}) {
            param_map in{{"x", random_argument(shape(type::float32, {batch, 4}), static_cast<unsigned>(batch))}};
            auto want = p.eval(in).at(0);
            argument out(want.get_shape());
            p.eval_into(in, {out});
            EXPECT_EQ(out.to_vector<float>(), want.to_vector<float>()) << target << " batch " << batch;
        }
    }
}

TEST(core_eval_into, concurrent_calls_write_their_own_buffers) {
    auto p = compiled("add_relu.onnx", "cpu");
    std::vector<param_map> ins;
    std::vector<std::vector<float>> want;
    for (unsigned t = 0; t < 4; ++t) {
        shape s(type::float32, {2, 3});
        ins.push_back({{"x", random_argument(s, 10 + t)}, {"y", random_argument(s, 20 + t)}});
        want.push_back(p.eval(ins.back()).at(0).to_vector<float>());
    }
    std::vector<argument> outs;
    for (int t = 0; t < 4; ++t) outs.emplace_back(shape(type::float32, {2, 3}));
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int r = 0; r < 50; ++r) p.eval_into(ins[t], {outs[t]});
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(outs[t].to_vector<float>(), want[t]);
}
