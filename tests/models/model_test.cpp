// Real models (../shared/models) against ONNX Runtime's stored outputs, on each target,
// for every test data set (other batch sizes and sequence lengths included), plus the
// memory-planning checks on whole models.
#include "passes/memory_coloring.hpp"

#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>

#include "shared_models.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const fs::path models_dir = fs::path(KILN_SHARED_DIR) / "models";

struct data_set {
    param_map inputs;
    std::vector<argument> outputs;
    std::unordered_map<std::string, std::vector<std::size_t>> dims;
};

// Reads test_data_set_K of a model: inputs by the model's input order, expected outputs.
data_set read_data_set(const fs::path& model_dir, std::size_t k, const std::vector<std::string>& input_names) {
    data_set d;
    auto dir = model_dir / ("test_data_set_" + std::to_string(k));
    for (std::size_t i = 0; i < input_names.size(); ++i) {
        auto a = read_tensor_proto((dir / ("input_" + std::to_string(i) + ".pb")).string());
        d.dims[input_names[i]] = a.get_shape().lens();
        d.inputs[input_names[i]] = a;
    }
    for (std::size_t i = 0; fs::exists(dir / ("output_" + std::to_string(i) + ".pb")); ++i)
        d.outputs.push_back(read_tensor_proto((dir / ("output_" + std::to_string(i) + ".pb")).string()));
    return d;
}

std::size_t count_data_sets(const fs::path& model_dir) {
    std::size_t n = 0;
    while (fs::exists(model_dir / ("test_data_set_" + std::to_string(n)))) ++n;
    return n;
}

// max |a-b| <= atol + rtol*|b|, the tolerance the models' README gives for fp32.
void expect_close(const argument& actual, const argument& expected, const std::string& what, double rtol = 1e-3,
                  double atol = 1e-4) {
    ASSERT_EQ(actual.get_shape().lens(), expected.get_shape().lens()) << what;
    auto a = actual.to_vector<double>();
    auto e = expected.to_vector<double>();
    std::size_t bad = 0;
    double worst = 0;
    for (std::size_t i = 0; i < e.size(); ++i) {
        double diff = std::fabs(a[i] - e[i]);
        if (!(diff <= atol + rtol * std::fabs(e[i]))) ++bad;
        if (!(diff <= worst)) worst = diff;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << e.size() << " elements outside tolerance, max abs diff "
                       << worst;
}

std::vector<std::string> model_names() {
    return {"fashion_resnet", "lstm_seq", "bert_small", "vit_tiny", "mobilenet_v2", "efficientnet_b0", "resnet50"};
}

using test::target_under_test;

class model_test : public testing::TestWithParam<std::string> {};

TEST_P(model_test, matches_onnx_runtime) {
    auto dir = models_dir / GetParam();
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
    auto sets = count_data_sets(dir);
    ASSERT_GT(sets, 0u);
    auto names = parse_onnx((dir / "model.onnx").string()).get_parameter_names();
    for (std::size_t k = 0; k < sets; ++k) {
        auto d = read_data_set(dir, k, names);
        onnx_options opts;
        opts.map_input_dims = d.dims;
        auto p = parse_onnx((dir / "model.onnx").string(), opts);
        p.compile(*get_target(target_under_test()));
        auto out = p.eval(d.inputs);
        ASSERT_EQ(out.size(), d.outputs.size());
        for (std::size_t i = 0; i < out.size(); ++i)
            expect_close(out[i], d.outputs[i], GetParam() + " set " + std::to_string(k) + " output " + std::to_string(i));
    }
}

// Runs every data set of `dir` through the one program `p` and compares with ONNX Runtime's
// outputs (`label` names the way it was compiled in failures).
void expect_every_data_set_matches(const program& p, const fs::path& dir, const std::string& label) {
    auto names = p.get_parameter_names();
    for (std::size_t k = 0; k < count_data_sets(dir); ++k) {
        auto d = read_data_set(dir, k, names);
        auto out = p.eval(d.inputs);
        ASSERT_EQ(out.size(), d.outputs.size());
        for (std::size_t i = 0; i < out.size(); ++i)
            expect_close(out[i], d.outputs[i], label + " set " + std::to_string(k) + " output " + std::to_string(i));
    }
}

// As a new user runs it: parsed with no dim option (its symbolic dims stay dynamic), compiled
// once, saved and loaded; that one program runs every data set (batch 1 and 2, several
// sequence lengths) and matches ONNX Runtime.
TEST_P(model_test, one_program_with_the_default_dims_runs_every_data_set) {
    auto dir = models_dir / GetParam();
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
    auto p = parse_onnx((dir / "model.onnx").string());
    p.compile(*get_target(target_under_test()));
    auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(q.compiled_ahead().size(), p.compiled_ahead().size());
    expect_every_data_set_matches(q, dir, GetParam() + " (default dims)");
}

// With a batch bucket of 4, the data sets' batches 1 and 2 run padded on the bucket's
// program where the model keeps its batch rows apart (the CNNs, bert_small), as they are
// elsewhere (vit_tiny, lstm_seq); either way the outputs match ONNX Runtime's.
TEST_P(model_test, batch_buckets_pad_only_where_rows_stay_apart) {
    auto dir = models_dir / GetParam();
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
    auto p = parse_onnx((dir / "model.onnx").string());
    compile_options o;
    o.dynamic_buckets = {dim_buckets{"batch", {4}}};
    p.compile(*get_target(target_under_test()), o);
    expect_every_data_set_matches(p, dir, GetParam() + " (batch bucket 4)");
    const bool rows_apart = GetParam() != "vit_tiny" && GetParam() != "lstm_seq";
    EXPECT_EQ(p.get_specialization_stats().padded_runs > 0, rows_apart) << GetParam();
}

TEST_P(model_test, planned_equals_unplanned_bitwise) {
    auto dir = models_dir / GetParam();
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP();
    auto names = parse_onnx((dir / "model.onnx").string()).get_parameter_names();
    auto d = read_data_set(dir, 0, names);
    onnx_options opts;
    opts.map_input_dims = d.dims;
    auto planned = parse_onnx((dir / "model.onnx").string(), opts);
    auto unplanned = planned;
    planned.compile(*get_target(target_under_test()));
    compile_options no_plan;
    no_plan.memory_planning = false;
    unplanned.compile(*get_target(target_under_test()), no_plan);
    auto a = planned.eval(d.inputs);
    auto b = unplanned.eval(d.inputs);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i] == b[i]) << GetParam() << " output " << i;
    EXPECT_GT(planned.get_memory_usage().arena_bytes, 0u);
}

INSTANTIATE_TEST_SUITE_P(models, model_test, testing::ValuesIn(model_names()));

// The dynamic-batch path: one program, compiled per input shape on demand.
TEST(model_dynamic, fashion_resnet_dynamic_batch) {
    auto dir = models_dir / "fashion_resnet";
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP();
    onnx_options opts;
    opts.map_dyn_input_dims["input"] = {dynamic_dimension{1, 16, {}}, dynamic_dimension{1, 1, {}},
                                        dynamic_dimension{28, 28, {}}, dynamic_dimension{28, 28, {}}};
    auto p = parse_onnx((dir / "model.onnx").string(), opts);
    p.compile(*get_target(target_under_test()));
    for (std::size_t k = 0; k < count_data_sets(dir); ++k) {
        auto d = read_data_set(dir, k, {"input"});
        auto out = p.eval(d.inputs);
        expect_close(out.at(0), d.outputs.at(0), "fashion_resnet dynamic, set " + std::to_string(k));
    }
}

// ResNet-50 at batch 1: the arena against the sum of all intermediate buffers and the
// liveness lower bound (the largest total of simultaneously live buffers).
TEST(model_memory, resnet50_arena_near_lower_bound) {
    auto path = models_dir / "resnet50" / "model.onnx";
    if (!fs::exists(path)) GTEST_SKIP();
    onnx_options batch_1;
    batch_1.default_dim_value = 1;
    auto p = parse_onnx(path.string(), batch_1);
    auto unplanned = p;
    compile_options no_plan;
    no_plan.memory_planning = false;
    unplanned.compile(*get_target(target_under_test()), no_plan);
    auto intervals = buffer_intervals(*unplanned.get_main_module());
    std::size_t sum = 0;
    for (auto& b : intervals) sum += b.bytes;
    auto lower = liveness_lower_bound(intervals);
    p.compile(*get_target(target_under_test()));
    auto arena = p.get_memory_usage().arena_bytes;
    std::cout << "resnet50 batch 1 on " << target_under_test() << ": arena " << arena << " bytes, sum of "
              << intervals.size() << " intermediate buffers " << sum << " bytes, liveness lower bound " << lower
              << " bytes, arena / lower bound = " << static_cast<double>(arena) / static_cast<double>(lower) << "\n";
    RecordProperty("arena_bytes", std::to_string(arena));
    RecordProperty("sum_bytes", std::to_string(sum));
    RecordProperty("lower_bound_bytes", std::to_string(lower));
    EXPECT_LE(static_cast<double>(arena), 1.25 * static_cast<double>(lower));
    EXPECT_LT(arena, sum);
}

}  // namespace
