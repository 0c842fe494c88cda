// The gpu target's fused attention (codegen/emit_attention.hpp) without a device: the
// shared matcher (passes/attention_match.hpp) finds the attentions of bert_small and
// vit_tiny, the gpu pipeline makes each one generated kernel, NVRTC builds them for sm_90
// without spills, and their host build (blocks as fibers, host_shim.hpp) agrees with the
// reference compute of the matched ops on random non-zero data (rtol 1e-4, atol 1e-5; the
// largest errors are printed). KILN_GPU_ATTENTION=0 keeps the cuBLASLt + softmax path.
#include "gpu_test_util.hpp"
#include "attention_cases.hpp"

#include "passes/attention_match.hpp"
#include "targets/gpu/codegen/emit_attention.hpp"
#include "unit/env_override.hpp"

#include <kiln/onnx.hpp>

#include <filesystem>
#include <iostream>
#include <sstream>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

bool is_attention(instruction_ref ins) {
    const auto* k = ins->get_operator().any_cast<gpu::fused_kernel>();
    return k && gpu::codegen::attention_form_of(k->body).has_value();
}

std::size_t attention_kernels(module& m) {
    std::size_t n = 0;
    for (auto ins = m.begin(); ins != m.end(); ++ins) n += is_attention(ins);
    return n;
}

std::size_t count(module& m, const std::string& op) {
    std::size_t n = 0;
    for (auto& ins : m) n += ins.name() == op;
    return n;
}

program compiled(const std::vector<attention_case>& cases) {
    auto p = attention_program(cases);
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    return p;
}

}  // namespace

namespace {

// Runs every attention kernel of `m` on the host (its whole grid) against the reference
// compute of its ops on random non-zero data, and prints the largest errors (relative ones
// over 1e-4 are at outputs near zero, where V's signs cancel and the absolute term of the
// tolerance applies); `names[k]` names the k-th. Returns how many ran.
std::size_t expect_attention_matches_ref(module& m, const std::vector<std::string>& names) {
    host_library lib(gpu::codegen::module_source(m));
    if (!lib.ok()) return 0;
    host_context ctx;
    unsigned seed = 7;
    std::size_t k = 0;
    for (auto ins : gpu_kernels(m)) {
        if (!is_attention(ins)) continue;
        const auto& kern = ins->get_operator().get<gpu::fused_kernel>();
        std::vector<argument> inputs;
        for (std::size_t i = 0; i + 1 < ins->inputs().size(); ++i)
            inputs.push_back(random_tensor(ins->inputs()[i]->get_shape(), seed++));
        const shape out = ins->get_shape().as_standard();
        argument got(out);
        lib.run(kern.symbol, inputs, got, kern.grid, gpu::codegen::block_size);
        const argument want = kern.body.compute(ctx, out, inputs);
        const auto* g = reinterpret_cast<const float*>(got.data());
        const auto* w = reinterpret_cast<const float*>(want.data());
        double max_abs = 0, max_rel = 0, used = 0;  // used: the largest share of the tolerance
        std::size_t bad = 0;
        for (std::size_t i = 0; i < out.elements(); ++i) {
            const double d = std::fabs(static_cast<double>(g[i]) - w[i]);
            max_abs = std::max(max_abs, d);
            if (std::fabs(w[i]) > 1e-3) max_rel = std::max(max_rel, d / std::fabs(w[i]));
            used = std::max(used, d / (1e-5 + 1e-4 * std::fabs(w[i])));
            bad += !nearly_equal(g[i], w[i]);
        }
        const std::string name = k < names.size() ? names[k] : names.back() + " #" + std::to_string(k);
        EXPECT_EQ(bad, 0u) << name << ": " << bad << " of " << out.elements() << " elements differ";
        std::cout << "[ gpu      ] attention " << name << ": " << out.to_string() << ", grid " << kern.grid
                  << ", max abs error " << max_abs << ", max rel error " << max_rel
                  << " (|ref| > 1e-3), at most " << used << " of the tolerance 1e-5 + 1e-4 |ref|\n";
        ++k;
    }
    return k;
}

}  // namespace

// Each case (attention_cases.hpp) is one kernel, checked against the reference.
TEST(gpu_attention, kernels_match_the_reference_on_every_case) {
    const auto cases = attention_cases();
    auto p = compiled(cases);
    auto& m = *p.get_main_module();
    ASSERT_EQ(attention_kernels(m), cases.size()) << m;
    EXPECT_EQ(count(m, "gpu::lt_matmul"), 0u) << "no product is left to cuBLASLt";
    EXPECT_EQ(count(m, "gpu::host_kernel"), 0u);
    std::vector<std::string> names;
    for (const auto& c : cases) names.push_back(c.name);
    EXPECT_EQ(expect_attention_matches_ref(m, names), cases.size());
}

// An attention kernel's body (matmul, literal scale, mask, softmax) survives the op's
// value round trip that .kiln files use, and regenerates the same kernel.
TEST(gpu_attention, the_body_round_trips_and_regenerates_the_same_kernel) {
    auto p = compiled(attention_cases());
    auto& m = *p.get_main_module();
    std::size_t n = 0;
    for (auto ins : gpu_kernels(m)) {
        if (!is_attention(ins)) continue;
        const auto& k = ins->get_operator().get<gpu::fused_kernel>();
        const operation back = ins->get_operator().with_value(ins->get_operator().to_value());
        const auto& k2 = back.get<gpu::fused_kernel>();
        EXPECT_TRUE(k2.body.nodes == k.body.nodes);
        auto shapes = to_shapes(ins->inputs());
        shapes.pop_back();
        EXPECT_EQ(gpu::codegen::attention_symbol(k2.body, shapes), k.symbol);
        ++n;
    }
    EXPECT_EQ(n, attention_cases().size());
}

// The module's kernels build for sm_90 with no spills (ptxas's report), and the generic
// check of every kernel agrees too.
TEST(gpu_attention, kernels_compile_for_sm_90_without_spills) {
    auto p = compiled(attention_cases());
    auto& m = *p.get_main_module();
    const auto built = gpu::codegen::compile_cuda(gpu::codegen::module_source(m), "sm_90", true, "");
    std::size_t reported = 0;
    for (const auto& u : built.usage) {
        if (u.function.find("attention") == std::string::npos) continue;
        ++reported;
        EXPECT_FALSE(u.spills()) << u.function << ":\n" << built.log;
        std::cout << "[ gpu      ] " << u.function << ": spill stores " << u.spill_stores << ", loads "
                  << u.spill_loads << ", stack " << u.stack << " bytes\n";
    }
    // ptxas's lines for them (registers, shared memory).
    std::istringstream log(built.log);
    bool ours = false;
    for (std::string line; std::getline(log, line);) {
        if (line.find("Compiling entry function") != std::string::npos || line.find("Function properties") != std::string::npos)
            ours = line.find("attention") != std::string::npos;
        if (ours && line.find("Used") != std::string::npos) std::cout << "[ gpu      ]   " << line << "\n";
    }
    EXPECT_EQ(reported, attention_kernels(m)) << built.log;
    (void)check_kernels(m, "attention");
}

// Where it must not apply (KILN_GPU_ATTENTION=0, a head dim over 128), the products go to
// cuBLASLt as before (rank-3 standard operands: plan_lt takes them).
TEST(gpu_attention, the_fallback_stays) {
    const auto rank3 = attention_cases().back();
    ASSERT_EQ(rank3.rank, 3u);
    {
        kiln::test::env_override off("KILN_GPU_ATTENTION", "0");
        auto p = compiled({rank3});
        EXPECT_EQ(attention_kernels(*p.get_main_module()), 0u);
        EXPECT_EQ(count(*p.get_main_module(), "gpu::lt_matmul"), 2u);
    }
    auto big = rank3;
    big.d = big.dv = 160;
    auto p = compiled({big});
    EXPECT_EQ(attention_kernels(*p.get_main_module()), 0u);
    EXPECT_EQ(count(*p.get_main_module(), "gpu::lt_matmul"), 2u);
}

// gpt_kv (tests/data/dynamic_models: GPT-2 attention over a KV cache, its causal mask a
// where on the scores) at fixed shapes, as the gpu target compiles each shape of a dynamic
// program: one attention kernel per layer, over the past and new keys.
TEST(gpu_attention, the_kv_cache_decoder_attends_in_one_kernel_per_layer) {
    const auto file = std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "data" / "dynamic_models" / "gpt_kv" / "model.onnx";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
    for (const std::size_t new_tokens : {4u, 1u}) {
        const std::vector<std::size_t> kv = {1, 4, 12, 16};
        onnx_options oo;
        oo.default_dim_value = 1;
        oo.map_input_dims = {{"input_ids", {1, new_tokens}}, {"past_key_0", kv}, {"past_value_0", kv},
                             {"past_key_1", kv}, {"past_value_1", kv}};
        auto p = parse_onnx(file.string(), oo);
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        auto& m = *p.get_main_module();
        EXPECT_EQ(attention_kernels(m), 2u) << new_tokens << " new tokens";
        EXPECT_EQ(count(m, "gpu::host_kernel"), 0u);
        EXPECT_EQ(expect_attention_matches_ref(m, {"gpt_kv, " + std::to_string(new_tokens) + " new tokens over 12 past"}), 2u);
    }
}

// A dynamic gpt_kv (past and sequence as ranges) runs its generic program on the host; a
// specialization (dynamic_program.cpp: the parameters' shapes set, then the
// usual compile) of a decode step fuses both attentions, the causal mask folded to a
// literal by the target-independent passes.
TEST(gpu_attention, a_dynamic_decoders_specialization_fuses_its_attention) {
    const auto file = std::filesystem::path(KILN_SOURCE_DIR) / "tests" / "data" / "dynamic_models" / "gpt_kv" / "model.onnx";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
    const auto dynamic = parse_onnx(file.string(), {});  // (its generic program: gpu_runtime's generic test)
    for (const std::size_t past : {0u, 7u, 31u}) {
        auto p = dynamic;
        const shape kv(type::float32, {1, 4, past, 16});
        p.get_main_module()->set_parameter_shapes({{"input_ids", shape(type::int64, {1, 1})}, {"past_key_0", kv},
                                                   {"past_value_0", kv}, {"past_key_1", kv}, {"past_value_1", kv}});
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        EXPECT_EQ(attention_kernels(*p.get_main_module()), 2u) << "past " << past;
        EXPECT_EQ(expect_attention_matches_ref(*p.get_main_module(), {"gpt_kv decode step, past " + std::to_string(past)}), 2u);
    }
}

// The shared matcher on the shared models, after the target-independent passes (what the
// targets see), and the gpu pipeline's kernels for them at the models' own shapes.
TEST(gpu_attention, the_matcher_finds_the_attentions_of_bert_small_and_vit_tiny) {
    std::size_t models = 0;
    for (const auto& [name, heads] : std::vector<std::pair<const char*, std::size_t>>{{"bert_small", 4}, {"vit_tiny", 6}}) {
        if (!std::filesystem::exists(model_file(name))) continue;
        ++models;
        auto p = parse_model(name);
        run_passes(p, target_independent_passes({}));
        const auto found = attention_match::find_all(*p.get_main_module());
        std::size_t masked = 0;
        for (const auto& mt : found) masked += mt.mask.has_value();
        std::cout << "[ gpu      ] " << name << ": " << found.size() << " attentions, " << masked << " with a mask\n";
        EXPECT_EQ(found.size(), heads) << name;
        auto q = parse_model(name);
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(q, o);
        EXPECT_EQ(attention_kernels(*q.get_main_module()), heads) << name;
        EXPECT_EQ(expect_attention_matches_ref(*q.get_main_module(), {name}), heads);
    }
    if (models == 0) GTEST_SKIP() << "no shared models";
}
