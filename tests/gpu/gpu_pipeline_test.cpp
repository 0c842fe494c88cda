// The gpu target's pipeline on IR: its named passes in order, what becomes a generated
// kernel or cuBLASLt, library workspaces as planned buffers, the module's machine code on
// its first kernel, and the NVRTC cache.
#include "gpu_test_util.hpp"
#include "reduction_cases.hpp"

#include "targets/gpu/host_fallback.hpp"
#include "targets/gpu/kernels/lt_matmul.hpp"
#include "targets/gpu/selection.hpp"
#include "unit/env_override.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/onnx.hpp>
#include <kiln/register_op.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

// Two matmuls with a GELU-like chain between them: x [16, 64] @ w1 [64, 128] -> +b, tanh,
// *x2 -> @ w2 [128, 32].
program two_matmuls() {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {16, 64}));
    auto w1 = m->add_parameter("w1", shape(type::float32, {64, 128}));
    auto b1 = m->add_parameter("b1", shape(type::float32, {128}));
    auto w2 = m->add_parameter("w2", shape(type::float32, {128, 32}));
    auto h = m->add_instruction(make_op("matmul"), {x, w1});
    auto a = m->add_instruction(make_op("add"), {h, b1});
    auto t = m->add_instruction(make_op("mul"), {m->add_instruction(make_op("tanh"), {a}), a});
    m->add_return({m->add_instruction(make_op("matmul"), {t, w2})});
    return p;
}

std::size_t count(module& m, const std::string& name) {
    std::size_t n = 0;
    for (auto& ins : m) n += ins.name() == name;
    return n;
}

struct scratch_dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() / ("kiln_gpu_cache_" + std::to_string(::getpid()));
    scratch_dir() {
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
    }
    ~scratch_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

}  // namespace

TEST(gpu_pipeline, named_passes_in_order) {
    auto t = get_target("gpu");
    compile_options o;
    auto ctx = t->make_context(o);
    std::vector<std::string> names;
    for (auto& p : t->get_passes(*ctx, o)) names.push_back(p.name());
    const std::vector<std::string> want = {"gpu::split_conv_bias",  "gpu::fuse_attention", "fuse_pointwise",       "gpu::lowering",        "ref::lowering",
                                           "gpu::place_host_ops",   "gpu::compile_kernels", "dead_code_elimination",
                                           "schedule",              "memory_coloring",      "gpu::device_allocations"};
    EXPECT_EQ(names, want);
}

TEST(gpu_pipeline, matmul_to_cublaslt_pointwise_to_one_generated_kernel_workspaces_planned) {
    auto p = two_matmuls();
    compile_for_gpu(p);
    auto& m = *p.get_main_module();
    EXPECT_EQ(count(m, "gpu::lt_matmul"), 2u);
    EXPECT_EQ(count(m, "gpu::fused_kernel"), 1u);
    EXPECT_EQ(count(m, "ref::kernel"), 0u);
    EXPECT_EQ(count(m, "allocate"), 0u) << "no host allocation is left";
    EXPECT_EQ(count(m, "gpu::allocate"), 0u) << "the returned result is planned too (plan_results, for CUDA graphs)";
    // Each product's workspace is a planned view of the arena, and the two share it.
    std::set<std::size_t> offsets;
    for (auto& ins : m) {
        if (ins.name() != "gpu::lt_matmul") continue;
        auto ws = ins.inputs()[2];
        ASSERT_EQ(ws->name(), "load") << "workspace not planned";
        EXPECT_EQ(ws->get_shape().bytes(), gpu::lt_workspace_bytes);
        offsets.insert(static_cast<std::size_t>(ws->get_operator().to_value().at("offset").get_uint64()));
    }
    EXPECT_EQ(offsets.size(), 1u) << "workspaces live at different times share their bytes";
    // The module's first (here only) kernel carries its source, CUBIN and PTX.
    const auto k = gpu_kernels(m).front()->get_operator().get<gpu::fused_kernel>();
    EXPECT_EQ(k.arch, "sm_90");
    EXPECT_TRUE(k.cubin.is_binary() && !k.cubin.get_binary().bytes.empty());
    EXPECT_TRUE(k.ptx.is_binary() && k.ptx.get_binary().bytes.find(".target sm_90") != std::string::npos);
    EXPECT_NE(k.source.get_binary().bytes.find(k.symbol), std::string::npos);
}

TEST(gpu_pipeline, what_no_candidate_takes_runs_on_the_reference_kernels) {
    test::env_override no_cudnn("KILN_GPU_CUDNN", "0");  // the convolution is then what no candidate takes
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 3, 8, 8}));
    auto w = m->add_parameter("w", shape(type::float32, {4, 3, 3, 3}));
    m->add_return({m->add_instruction(make_op("relu"), {m->add_instruction(make_op("convolution"), {x, w})})});
    compile_for_gpu(p);
    // The reference convolution runs on the host between copies (host_fallback.hpp).
    EXPECT_EQ(count(*p.get_main_module(), "ref::kernel"), 0u);
    EXPECT_EQ(count(*p.get_main_module(), "gpu::host_kernel"), 1u);
    EXPECT_EQ(count(*p.get_main_module(), "gpu::fused_kernel"), 1u);
}

TEST(gpu_pipeline, selection_table_lists_the_candidates_in_order) {
    const auto table = gpu::selection_table();
    const auto gen = table.find("| generated |");
    const auto lt = table.find("| cublaslt |");
    const auto ref = table.find("| ref |");
    EXPECT_TRUE(gen < lt && lt < ref && ref != std::string::npos) << table;
}

TEST(gpu_pipeline, nvrtc_results_are_cached_by_content_and_corrupt_entries_rebuilt) {
    scratch_dir dir;
    auto p = two_matmuls();
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto source = gpu::codegen::module_source(*p.get_main_module());
    auto& st = gpu::codegen::stats();
    const auto compiles = st.compiles.load(), hits = st.cache_hits.load(), rejects = st.cache_rejects.load();
    const auto a = gpu::codegen::compile_cuda(source, "sm_90", true, dir.path.string());
    EXPECT_FALSE(a.cached);
    const auto b = gpu::codegen::compile_cuda(source, "sm_90", true, dir.path.string());
    EXPECT_TRUE(b.cached);
    EXPECT_EQ(a.key, b.key);
    EXPECT_EQ(a.cubin, b.cubin);
    EXPECT_EQ(a.ptx, b.ptx);
    EXPECT_EQ(st.compiles.load(), compiles + 1);
    EXPECT_EQ(st.cache_hits.load(), hits + 1);
    // Other options or arch: another entry.
    EXPECT_NE(gpu::codegen::compile_cuda(source, "sm_90", false, dir.path.string()).key, a.key);
    EXPECT_NE(gpu::codegen::compile_cuda(source, "sm_90a", true, dir.path.string()).key, a.key);
    // A damaged CUBIN is noticed and rebuilt.
    std::ofstream(dir.path / ("gpu-" + a.key + ".cubin"), std::ios::binary | std::ios::trunc) << "garbage";
    const auto c = gpu::codegen::compile_cuda(source, "sm_90", true, dir.path.string());
    EXPECT_FALSE(c.cached);
    EXPECT_EQ(c.cubin, a.cubin);
    EXPECT_EQ(st.cache_rejects.load(), rejects + 1);
}

TEST(gpu_pipeline, arch_comes_from_kiln_gpu_arch_and_bad_ones_are_refused) {
    {
        kiln::test::env_override env("KILN_GPU_ARCH", "sm_90a");
        auto p = two_matmuls();
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        EXPECT_EQ(gpu_kernels(*p.get_main_module()).front()->get_operator().get<gpu::fused_kernel>().arch, "sm_90a");
    }
    kiln::test::env_override env("KILN_GPU_ARCH", "compute_90");
    try {
        (void)get_target("gpu")->make_context({});
        FAIL() << "a virtual arch was taken";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(e.message().find("compute_90"), std::string::npos);
    }
}

namespace {

// host_kernel ops wrapping a softmax, a reduction or a fused group (one the generator
// declined would run on the host whole, reductions and all).
std::vector<std::string> host_reductions(module& m) {
    std::vector<std::string> out;
    for (auto& ins : m) {
        if (ins.name() != "gpu::host_kernel") continue;
        const auto n = ins.get_operator().get<gpu::host_kernel>().op.name();
        if (n.find("softmax") != std::string::npos || n.rfind("reduce_", 0) == 0 || n == "fused") out.push_back(n);
    }
    return out;
}

}  // namespace

// One attention head and the layer norm after it, as bert exports them: the attention is
// one generated kernel (KILN_GPU_ATTENTION=0: two cuBLASLt products, the mask add and the
// softmax as generated kernels), the layer norm one more; nothing on the host.
TEST(gpu_pipeline, attention_and_layer_norm_leave_no_host_softmax_or_reduction) {
    auto make = [] {
        program p;
        auto* m = p.get_main_module();
        auto q = m->add_parameter("q", shape(type::float32, {1, 4, 128, 32}));
        auto k = m->add_parameter("k", shape(type::float32, {1, 4, 32, 128}));
        auto v = m->add_parameter("v", shape(type::float32, {1, 4, 128, 32}));
        auto mask = m->add_parameter("mask", shape(type::float32, {1, 1, 1, 128}));
        auto g = m->add_parameter("g", shape(type::float32, {32}));
        auto b = m->add_parameter("b", shape(type::float32, {32}));
        auto scores = m->add_instruction(make_op("add"), {m->add_instruction(make_op("matmul"), {q, k}), mask});
        auto probs = m->add_instruction(make_op("softmax", {{"axis", 3}}), {scores});
        auto ctx = m->add_instruction(make_op("matmul"), {probs, v});
        m->add_return({layer_norm(*m, ctx, g, b)});
        return p;
    };
    for (const bool fused : {true, false}) {
        auto p = make();
        {
            kiln::test::env_override attention("KILN_GPU_ATTENTION", fused ? "1" : "0");
            compile_for_gpu(p);
        }
        auto& mm = *p.get_main_module();
        EXPECT_TRUE(host_reductions(mm).empty());
        EXPECT_EQ(count(mm, "gpu::fused_kernel"), fused ? 2u : 3u) << (fused ? "attention, layer norm" : "mask add, softmax, layer norm");
        EXPECT_EQ(count(mm, "gpu::lt_matmul"), fused ? 0u : 2u);
    }
}

// The shared transformer models: no softmax or reduction is left to the host.
TEST(gpu_pipeline, bert_small_and_vit_tiny_keep_softmax_and_reductions_on_the_device) {
    std::size_t models = 0;
    for (const char* name : {"bert_small", "vit_tiny"}) {
        const auto file = std::filesystem::path(KILN_SHARED_DIR) / "models" / name / "model.onnx";
        if (!std::filesystem::exists(file)) continue;
        onnx_options oo;
        oo.default_dim_value = 1;
        if (std::string(name) == "bert_small") oo.map_input_dims = {{"input_ids", {1, 128}}, {"attention_mask", {1, 128}}};
        auto p = parse_onnx(file.string(), oo);
        compile_for_gpu(p);
        const auto left = host_reductions(*p.get_main_module());
        EXPECT_TRUE(left.empty()) << name << ": " << left.size() << " on the host, first " << left.front();
        ++models;
    }
    if (models == 0) GTEST_SKIP() << "no shared models";
}
