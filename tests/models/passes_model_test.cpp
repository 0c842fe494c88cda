// What the target-independent pipeline and the scheduler do to the real models
// (../shared/models): instruction counts before/after, and the arena of the ref target's
// plan with and without `schedule` (which must never be larger). Correctness of the
// compiled models against ONNX Runtime is model_test.cpp's job (compile runs these passes).
#include "passes/memory_coloring.hpp"
#include "passes/schedule.hpp"
#include "targets/ref/lowering.hpp"

#include <kiln/onnx.hpp>
#include <kiln/pipeline.hpp>
#include <kiln/program.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const fs::path models_dir = fs::path(KILN_SHARED_DIR) / "models";

// Dims of test_data_set_0's inputs (batch 1, the default sizes).
std::unordered_map<std::string, std::vector<std::size_t>> data_set_dims(const fs::path& dir) {
    std::unordered_map<std::string, std::vector<std::size_t>> dims;
    auto names = parse_onnx((dir / "model.onnx").string()).get_parameter_names();
    for (std::size_t i = 0; i < names.size(); ++i) {
        auto f = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
        if (fs::exists(f)) dims[names[i]] = read_tensor_proto(f.string()).get_shape().lens();
    }
    return dims;
}

struct counts {
    std::size_t all = 0, ops = 0;  // ops: excluding parameters, literals and the @return
    std::map<std::string, std::size_t> by_name;
};

counts count(const program& p) {
    counts c;
    for (auto m : p.get_modules())
        for (auto& ins : *m) {
            ++c.all;
            if (ins.is_param() || ins.is_literal() || ins.is_return()) continue;
            ++c.ops;
            ++c.by_name[ins.name()];
        }
    return c;
}

std::size_t arena(const module& m) {
    auto b = buffer_intervals(m);
    return assign_offsets(b, memory_coloring{}.alignment);
}

class model_passes : public testing::TestWithParam<std::string> {};

TEST_P(model_passes, pipeline_counts_and_schedule_arena) {
    auto dir = models_dir / GetParam();
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
    onnx_options opts;
    opts.map_input_dims = data_set_dims(dir);
    auto p = parse_onnx((dir / "model.onnx").string(), opts);
    auto before = count(p);
    run_passes(p, target_independent_passes(compile_options{}));
    auto after = count(p);
    std::cout << GetParam() << ": instructions " << before.all << " -> " << after.all << ", ops " << before.ops
              << " -> " << after.ops << "\n  ops after:";
    for (auto& [n, k] : after.by_name) std::cout << " " << n << " " << k;
    std::cout << "\n";
    RecordProperty("ops_before", std::to_string(before.ops));
    RecordProperty("ops_after", std::to_string(after.ops));
    EXPECT_LE(after.ops, before.ops);

    // The ref target's lowering, then the plan with the parsed order and with `schedule`.
    for (auto m : p.get_modules()) ref::lowering{}.apply(*m);
    auto* main = p.get_main_module();
    const auto unscheduled = arena(*main);
    schedule{}.apply(*main);
    main->validate();
    const auto scheduled = arena(*main);
    std::cout << "  ref arena: " << unscheduled << " bytes in parse order, " << scheduled
              << " bytes scheduled\n";
    RecordProperty("arena_unscheduled", std::to_string(unscheduled));
    RecordProperty("arena_scheduled", std::to_string(scheduled));
    EXPECT_LE(scheduled, unscheduled);
}

INSTANTIATE_TEST_SUITE_P(models, model_passes,
                         testing::Values("fashion_resnet", "lstm_seq", "bert_small", "vit_tiny", "mobilenet_v2",
                                         "efficientnet_b0", "resnet50"));

}  // namespace
