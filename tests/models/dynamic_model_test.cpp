// Models exported from PyTorch with dynamic axes (tests/data/dynamic_models, made by
// tests/data/make_dynamic_models.py), parsed once with their dims left symbolic and run at
// every shape of their test sets against PyTorch's outputs: a GPT-style decoder with a KV
// cache (prefill at past 0, decode steps at several past lengths, a greedy decode loop)
// and a BERT-style encoder with a dynamic sequence; lstm_seq from ../shared with dynamic
// batch and time. Each shape runs on the generic program and on its specialization.
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>

#include "shared_models.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cmath>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const fs::path dynamic_dir = fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "dynamic_models";
const fs::path shared_models = fs::path(KILN_SHARED_DIR) / "models";

using test::target_under_test;

// Symbolic dims stay dynamic over this range (past may be 0: a decoder's first call).
onnx_options dynamic_options() {
    onnx_options o;
    o.default_dyn_dim_value = {0, 512, {}};
    return o;
}

struct data_set {
    param_map inputs;
    std::vector<argument> outputs;
};

data_set read_set(const fs::path& dir, const std::vector<std::string>& names) {
    data_set d;
    for (std::size_t i = 0; i < names.size(); ++i)
        d.inputs[names[i]] = read_tensor_proto((dir / ("input_" + std::to_string(i) + ".pb")).string());
    for (std::size_t i = 0; fs::exists(dir / ("output_" + std::to_string(i) + ".pb")); ++i)
        d.outputs.push_back(read_tensor_proto((dir / ("output_" + std::to_string(i) + ".pb")).string()));
    return d;
}

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
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << e.size() << " outside tolerance, max abs diff " << worst;
}

// Every test set of a model through one parsed and compiled program: each set runs on
// the generic program first, then on the specialization its call asked for (compiled in
// the background), and both must match. Returns the program's specialization counters.
specialization_stats run_all_sets(const fs::path& dir, const onnx_options& opts) {
    auto p = parse_onnx((dir / "model.onnx").string(), opts);
    auto names = p.get_parameter_names();
    compile_options co;
    co.specialize_after = 1;
    p.compile(*get_target(target_under_test()), co);
    std::size_t sets = 0;
    for (; fs::exists(dir / ("test_data_set_" + std::to_string(sets))); ++sets) {
        auto d = read_set(dir / ("test_data_set_" + std::to_string(sets)), names);
        for (const char* form : {"first call", "second call"}) {
            auto out = p.eval(d.inputs);
            p.finish_specializations();
            [&] {
                ASSERT_EQ(out.size(), d.outputs.size());
                for (std::size_t i = 0; i < out.size(); ++i)
                    expect_close(out[i], d.outputs[i], dir.filename().string() + " set " + std::to_string(sets) +
                                                           " output " + std::to_string(i) + " (" + form + ")");
            }();
        }
    }
    EXPECT_GT(sets, 1u);
    auto s = p.get_specialization_stats();
    // Without a generic program, each set compiles on its first call.
    EXPECT_EQ(s.compiles, sets);
    EXPECT_EQ(s.hits, sets);
    EXPECT_EQ(s.generic_runs, s.generic ? sets : 0u);
    return s;
}

const dynamic_dimension& dim(const shape& s, std::size_t i) { return s.dyn_dims().at(i); }

double resident_mib() {
#if defined(__GLIBC__)
    ::malloc_trim(0);
#endif
    std::ifstream statm("/proc/self/statm");
    double size = 0, resident = 0;
    statm >> size >> resident;
    return resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20);
}

}  // namespace

TEST(dynamic_models, gpt_kv_keeps_the_exporters_dim_names) {
    auto p = parse_onnx((dynamic_dir / "gpt_kv" / "model.onnx").string(), dynamic_options());
    auto in = p.get_parameter_shapes();
    EXPECT_EQ(dim(in.at("input_ids"), 0).symbol, "batch");
    EXPECT_EQ(dim(in.at("input_ids"), 1).symbol, "sequence");
    EXPECT_EQ(dim(in.at("past_key_0"), 2).symbol, "past");
    // The results follow from the names through the graph's shape arithmetic (Shape,
    // Gather, Concat, Reshape to computed shapes, a mask sliced by past and past + seq).
    auto out = p.get_output_shapes();
    auto names = p.get_output_names();
    ASSERT_EQ(names.at(0), "logits");
    EXPECT_EQ(out.at(0).to_string(), "float32[{batch=0:512}, {sequence=0:512}, 256]");
    ASSERT_EQ(names.at(1), "present_key_0");
    EXPECT_EQ(dim(out.at(1), 0).symbol, "batch") << out.at(1);
    EXPECT_EQ(dim(out.at(1), 2).symbol, "past + sequence") << out.at(1);
    EXPECT_EQ(out.at(1).dyn_dims().at(3), (dynamic_dimension{16, 16, {}}));
}

TEST(dynamic_models, gpt_kv_prefill_and_decode_steps_match_pytorch) {
    auto s = run_all_sets(dynamic_dir / "gpt_kv", dynamic_options());
    EXPECT_TRUE(s.generic) << s.generic_unavailable;
}

// Greedy decoding of gpt_kv's 64 reference steps on `p`: each step's token, the presents
// fed back as the next step's pasts.
std::vector<std::int64_t> greedy_tokens(program& p, const std::vector<std::int64_t>& prompt, std::size_t steps) {
    const auto names = p.get_output_names();
    param_map in;
    in["input_ids"] = literal(shape(type::int64, {1, prompt.size()}), prompt).get_argument();
    for (int l = 0; l < 2; ++l)
        for (auto kv : {"past_key_", "past_value_"})
            in[kv + std::to_string(l)] = argument(shape(type::float32, {1, 4, 0, 16}));
    std::vector<std::int64_t> tokens;
    for (std::size_t step = 0; step < steps; ++step) {
        auto out = p.eval(in);
        const auto& logits = out.at(0);
        const auto& l = logits.get_shape().lens();
        auto v = logits.to_vector<float>();
        std::size_t base = (l[1] - 1) * l[2], best = 0;
        for (std::size_t t = 1; t < l[2]; ++t)
            if (v[base + t] > v[base + best]) best = t;
        tokens.push_back(static_cast<std::int64_t>(best));
        in["input_ids"] = literal(shape(type::int64, {1, 1}), std::vector<std::int64_t>{tokens.back()}).get_argument();
        for (std::size_t o = 1; o < out.size(); ++o) {
            auto name = names[o];  // present_key_L -> past_key_L
            in["past_" + name.substr(std::string("present_").size())] = out[o];
        }
    }
    return tokens;
}

struct greedy_reference {
    std::vector<std::int64_t> prompt, tokens;
};

greedy_reference gpt_kv_reference() {
    std::ifstream f(dynamic_dir / "gpt_kv" / "greedy_64.json");
    auto j = nlohmann::json::parse(f);
    return {j.at("prompt").get<std::vector<std::int64_t>>(), j.at("tokens").get<std::vector<std::int64_t>>()};
}

TEST(dynamic_models, gpt_kv_greedy_decode_gives_pytorchs_tokens) {
    const auto ref = gpt_kv_reference();
    auto p = parse_onnx((dynamic_dir / "gpt_kv" / "model.onnx").string(), dynamic_options());
    p.compile(*get_target(target_under_test()));
    EXPECT_EQ(greedy_tokens(p, ref.prompt, ref.tokens.size()), ref.tokens);
    // Every step has a new past length: no shape was compiled for itself. The generic
    // program ran the first steps; once past had changed twice with batch and sequence
    // staying, one program with past free (the rest static) was compiled in the
    // background and ran the steps after it.
    p.finish_specializations();
    auto s = p.get_specialization_stats();
    EXPECT_TRUE(s.generic) << s.generic_unavailable;
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.background_compiles, 1u);
    EXPECT_EQ(s.generic_runs + s.hits, ref.tokens.size());
    EXPECT_GE(s.generic_runs, 4u);
}

// As bench/decode.py parses it (README's decoder example): batch 1, sequence 1..128 with the
// decode step (1) as an optimal, compiled ahead with past free, past 0..127. That program's
// attention has a static result (one query row) over keys of any length.
TEST(dynamic_models, gpt_kv_with_the_decode_step_compiled_ahead_gives_pytorchs_tokens) {
    const auto ref = gpt_kv_reference();
    onnx_options o;
    const dynamic_dimension seq{1, 128, {1}, {}}, past{0, 127, {}, {}}, one{1, 1, {}, {}}, heads{4, 4, {}, {}},
        d{16, 16, {}, {}};
    o.map_dyn_input_dims["input_ids"] = {one, seq};
    for (int l = 0; l < 2; ++l)
        for (auto kv : {"past_key_", "past_value_"}) o.map_dyn_input_dims[kv + std::to_string(l)] = {one, heads, past, d};
    auto p = parse_onnx((dynamic_dir / "gpt_kv" / "model.onnx").string(), o);
    p.compile(*get_target(target_under_test()));
    EXPECT_EQ(greedy_tokens(p, ref.prompt, ref.tokens.size()), ref.tokens);
    auto s = p.get_specialization_stats();
    EXPECT_TRUE(s.generic) << s.generic_unavailable;
    EXPECT_GE(s.hits, ref.tokens.size() - 1) << "the steps after the prefill on the program compiled ahead";
}

TEST(dynamic_models, bert_dyn_sequence_lengths_match_pytorch) {
    auto s = run_all_sets(dynamic_dir / "bert_dyn", dynamic_options());
    EXPECT_TRUE(s.generic) << s.generic_unavailable;
}

// 200 different sequence lengths through one program: nothing compiles (each length
// comes once, so none is worth a specialization), and resident memory stays bounded.
TEST(dynamic_models, bert_dyn_two_hundred_lengths_compile_nothing) {
    auto p = parse_onnx((dynamic_dir / "bert_dyn" / "model.onnx").string(), dynamic_options());
    p.compile(*get_target(target_under_test()));
    auto run_length = [&](std::size_t len) {
        std::vector<std::int64_t> ids(len), mask(len, 1);
        for (std::size_t i = 0; i < len; ++i) ids[i] = static_cast<std::int64_t>((i * 7 + len) % 100 + 1);
        auto out = p.eval({{"input_ids", literal(shape(type::int64, {1, len}), ids).get_argument()},
                           {"attention_mask", literal(shape(type::int64, {1, len}), mask).get_argument()}});
        ASSERT_EQ(out.at(0).get_shape().lens(), (std::vector<std::size_t>{1, len, 64}));
        for (float v : out[0].to_vector<float>()) ASSERT_TRUE(std::isfinite(v));
    };
    for (std::size_t len = 1; len <= 10; ++len) run_length(len);
    const double rss_10 = resident_mib();
    for (std::size_t len = 11; len <= 200; ++len) run_length(len);
    const double rss_200 = resident_mib();
    auto s = p.get_specialization_stats();
    EXPECT_TRUE(s.generic) << s.generic_unavailable;
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.generic_runs, 200u);
    EXPECT_LT(rss_200, rss_10 * 1.1 + 8.0) << "resident memory after 10 lengths " << rss_10 << " MiB, after 200 "
                                           << rss_200 << " MiB";
}

TEST(dynamic_models, lstm_seq_dynamic_batch_and_time) {
    auto dir = shared_models / "lstm_seq";
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
    auto opts = dynamic_options();
    opts.default_dyn_dim_value = {1, 512, {}};
    run_all_sets(dir, opts);
}
