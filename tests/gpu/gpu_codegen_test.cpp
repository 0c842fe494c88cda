// The gpu target's generated kernels without a device: every op the generator handles,
// and every fused kernel of the shared models, compiles with NVRTC to sm_90 CUBIN without
// spills, and the same source built for the host agrees with the reference compute.
#include "gpu_test_util.hpp"

#include "codegen/expr.hpp"
#include "targets/gpu/codegen/device_header.hpp"

#include <kiln/onnx.hpp>
#include <kiln/register_op.hpp>

#include <filesystem>

using namespace kiln;
using namespace kiln::gpu_test;

namespace {

std::filesystem::path models_dir() { return std::filesystem::path(KILN_SHARED_DIR) / "models"; }

// The model at its default test shapes (README.md of the models): batch 1, bert's 128 tokens.
program parse_model(const std::filesystem::path& file) {
    onnx_options oo;
    oo.default_dim_value = 1;
    if (file.parent_path().filename() == "bert_small") oo.map_input_dims = {{"input_ids", {1, 128}}, {"attention_mask", {1, 128}}};
    return parse_onnx(file.string(), oo);
}

}  // namespace

TEST(gpu_codegen, every_op_compiles_for_sm90_and_matches_the_reference_on_the_host) {
    auto p = every_op();
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto rep = check_kernels(*p.get_main_module(), "every op");
    EXPECT_EQ(rep.kernels, op_cases().size()) << "an op did not become a generated kernel";
    EXPECT_EQ(rep.distinct, op_cases().size());
}

TEST(gpu_codegen, without_fast_math_too) {
    // libm-accurate functions and no FMA contraction: another NVRTC option set.
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4, 64}));
    auto y = m->add_parameter("y", shape(type::float32, {64}));
    auto g = m->add_instruction(make_op("gelu"), {m->add_instruction(make_op("add"), {x, y})});
    m->add_return({m->add_instruction(make_op("mul"), {g, m->add_instruction(make_op("sigmoid"), {g})})});
    compile_options o;
    o.fast_math = false;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto kernels = gpu_kernels(*p.get_main_module());
    ASSERT_EQ(kernels.size(), 1u);
    EXPECT_FALSE(kernels[0]->get_operator().get<gpu::fused_kernel>().fast_math);
    const auto built = gpu::codegen::compile_cuda(gpu::codegen::module_source(*p.get_main_module()), "sm_90", false, "");
    EXPECT_FALSE(built.cubin.empty());
}

TEST(gpu_codegen, kernels_include_only_kilns_device_header) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {8, 8}));
    m->add_return({m->add_instruction(make_op("exp"), {m->add_instruction(make_op("tanh"), {x})})});
    compile_options o;
    o.memory_planning = false;
    compile_for_gpu(p, o);
    const auto source = gpu::codegen::module_source(*p.get_main_module());
    std::size_t includes = 0;
    for (auto at = source.find("#include"); at != std::string::npos; at = source.find("#include", at + 1)) ++includes;
    EXPECT_EQ(includes, 1u);
    EXPECT_NE(source.find("#include \"kiln_device.h\""), std::string::npos);
    EXPECT_EQ(source.find("__builtin_"), std::string::npos) << "NVRTC knows no GCC builtins";
    EXPECT_EQ(gpu::codegen::device_header().find("#include"), std::string::npos);
}

TEST(gpu_codegen, ptxas_report_is_parsed) {
    const std::string log =
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for k\n"
        "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Function properties for tidy\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    const auto u = gpu::codegen::parse_ptxas_log(log);
    ASSERT_EQ(u.size(), 2u);
    EXPECT_EQ(u[0].function, "k");
    EXPECT_EQ(u[0].stack, 8u);
    EXPECT_EQ(u[0].spill_stores, 4u);
    EXPECT_EQ(u[0].spill_loads, 12u);
    EXPECT_TRUE(u[0].spills());
    EXPECT_FALSE(u[1].spills());
}

// Every fused kernel of every shared model: NVRTC for sm_90 without spills, and the host
// build against the reference (random non-zero inputs of each kernel's shapes).
TEST(gpu_codegen, every_fused_kernel_of_the_shared_models) {
    std::size_t models = 0;
    for (const char* name : {"bert_small", "efficientnet_b0", "mobilenet_v2", "resnet50", "vit_tiny", "lstm_seq",
                             "fashion_resnet"}) {
        const auto file = models_dir() / name / "model.onnx";
        if (!std::filesystem::exists(file)) continue;
        SCOPED_TRACE(name);
        auto p = parse_model(file);
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        const auto rep = check_kernels(*p.get_main_module(), name);
        std::cout << "[ gpu      ] " << name << ": " << rep.kernels << " fused kernels, " << rep.distinct
                  << " distinct, " << rep.elements << " elements checked on the host\n";
        if (std::string(name) != "lstm_seq") {
            EXPECT_GT(rep.kernels, 0u) << name;
        }
        ++models;
    }
    if (models == 0) GTEST_SKIP() << "no models in " << models_dir();
}

TEST(gpu_codegen, bert_small_gelu_and_efficientnet_silu_become_single_kernels) {
    for (const char* name : {"bert_small", "efficientnet_b0"}) {
        const auto file = models_dir() / name / "model.onnx";
        if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
        auto p = parse_model(file);
        compile_options o;
        o.memory_planning = false;
        compile_for_gpu(p, o);
        std::size_t erf = 0, sigmoid = 0;
        for (auto ins : gpu_kernels(*p.get_main_module())) {
            const auto& body = ins->get_operator().get<gpu::fused_kernel>().body;
            if (body.nodes.size() < 2) continue;
            for (const auto& n : body.nodes) {
                const auto text = n.op.name();
                erf += text == "erf";
                sigmoid += text == "sigmoid";
            }
        }
        if (std::string(name) == "bert_small") {
            EXPECT_EQ(erf, 4u) << "one fused GELU per layer";
        } else {
            EXPECT_GE(sigmoid, 16u) << "SiLU chains fused";
        }
    }
}
