// Post-op fusion into oneDNN convolutions and matrix products: each pattern gives the
// ref target's results, and the fused ops are gone from the compiled program; fusion
// is refused when an intermediate has another user or is a program output.
#include "cpu_test_util.hpp"

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value conv3x3() {
    return value::object{{"padding", value(value::array{1, 1, 1, 1})}, {"group", value(1)}};
}

// conv(x) followed by whatever `tail` builds on it; checks results and that the whole
// tail was fused (one cpu::convolution and nothing else but layout copies).
void check_conv_tail(const std::function<instruction_ref(builder&, instruction_ref)>& tail,
                     std::size_t expect_unfused = 0) {
    builder b;
    auto x = b.param("x", {1, 8, 13, 11});
    auto y = b.op("convolution", conv3x3(), {x, b.constant({16, 8, 3, 3}, 0.3f), b.constant({16})});
    b.ret({tail(b, y)});
    auto r = run_both(b, 1e-4, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::convolution"), 1u) << text(r.cpu);
    const std::size_t others = count_ops(r.cpu, "cpu::eltwise") + count_ops(r.cpu, "cpu::binary") +
                               ref_kernels(r.cpu).size();
    EXPECT_EQ(others, expect_unfused) << text(r.cpu);
}

}  // namespace

TEST(cpu_fusion, activations) {
    KILN_CPU_NEEDS_OPS("relu", "leaky_relu", "clip", "sigmoid", "tanh", "gelu", "hard_swish", "hard_sigmoid");
    check_conv_tail([](builder& b, instruction_ref y) { return b.op("relu", {y}); });
    check_conv_tail([](builder& b, instruction_ref y) {
        return b.op("leaky_relu", value::object{{"alpha", value(0.2f)}}, {y});
    });
    check_conv_tail([](builder& b, instruction_ref y) { return b.op("clip", {y, b.scalar(0.0f), b.scalar(6.0f)}); });
    check_conv_tail([](builder& b, instruction_ref y) { return b.op("sigmoid", {y}); });
    check_conv_tail([](builder& b, instruction_ref y) { return b.op("tanh", {y}); });
    check_conv_tail([](builder& b, instruction_ref y) { return b.op("hard_swish", {y}); });
    check_conv_tail([](builder& b, instruction_ref y) {
        return b.op("hard_sigmoid", value::object{{"alpha", value(0.3f)}, {"beta", value(0.4f)}}, {y});
    });
    for (const char* approx : {"none", "tanh"})
        check_conv_tail([&](builder& b, instruction_ref y) {
            return b.op("gelu", value::object{{"approximate", value(approx)}}, {y});
        });
}

TEST(cpu_fusion, silu_and_exported_gelu) {
    KILN_CPU_NEEDS_OPS("sigmoid", "mul", "div", "erf", "add");
    // SiLU as EfficientNet exports it: x * sigmoid(x).
    check_conv_tail([](builder& b, instruction_ref y) { return b.op("mul", {y, b.op("sigmoid", {y})}); });
    // GELU as PyTorch exports it: (x * (1 + erf(x / sqrt(2)))) * 0.5, and with 0.5 first.
    check_conv_tail([](builder& b, instruction_ref y) {
        auto e = b.op("erf", {b.op("div", {y, b.scalar(1.4142135f)})});
        auto m = b.op("mul", {y, b.op("add", {e, b.scalar(1.0f)})});
        return b.op("mul", {m, b.scalar(0.5f)});
    });
    check_conv_tail([](builder& b, instruction_ref y) {
        auto e = b.op("erf", {b.op("mul", {y, b.scalar(0.70710678f)})});
        auto h = b.op("mul", {y, b.scalar(0.5f)});
        return b.op("mul", {h, b.op("add", {b.scalar(1.0f), e})});
    });
}

TEST(cpu_fusion, residual_add_and_scaling) {
    KILN_CPU_NEEDS_OPS("add", "mul", "relu");
    // ResNet's block end: relu(conv(x) + shortcut), the shortcut an input in NCHW.
    builder b;
    auto x = b.param("x", {1, 8, 13, 11});
    auto s = b.param("s", {1, 16, 13, 11});
    auto y = b.op("convolution", conv3x3(), {x, b.constant({16, 8, 3, 3}, 0.3f), b.constant({16})});
    auto z = b.op("relu", {b.op("add", {s, b.op("mul", {y, b.scalar(0.5f)})})});
    b.ret({z});
    auto r = run_both(b, 1e-4, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::convolution"), 1u);
    EXPECT_EQ(count_ops(r.cpu, "cpu::binary"), 0u) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

TEST(cpu_fusion, two_convolutions_share_one_add) {
    KILN_CPU_NEEDS_OPS("add", "relu");
    // The downsampling block: add(conv_a(x), conv_b(x)); the add is fused into one of them.
    builder b;
    auto x = b.param("x", {1, 8, 13, 11});
    auto ya = b.op("convolution", conv3x3(), {x, b.constant({16, 8, 3, 3}, 0.3f), b.constant({16})});
    auto yb = b.op("convolution", conv3x3(), {x, b.constant({16, 8, 3, 3}, 0.3f)});
    b.ret({b.op("relu", {b.op("add", {ya, yb})})});
    auto r = run_both(b, 1e-4, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::convolution"), 2u);
    EXPECT_EQ(count_ops(r.cpu, "cpu::binary") + count_ops(r.cpu, "cpu::eltwise"), 0u) << text(r.cpu);
}

TEST(cpu_fusion, matmul_bias_and_gelu) {
    KILN_CPU_NEEDS_OPS("add", "mul", "div", "erf");
    // A transformer's linear layer: matmul(x, W) + b, then the exported erf GELU.
    builder b;
    auto x = b.param("x", {1, 13, 32});
    auto y = b.op("add", {b.op("matmul", {x, b.constant({32, 48}, 0.3f)}), b.constant({48})});
    auto e = b.op("erf", {b.op("div", {y, b.scalar(1.4142135f)})});
    auto g = b.op("mul", {b.op("mul", {y, b.op("add", {e, b.scalar(1.0f)})}), b.scalar(0.5f)});
    b.ret({g});
    auto r = run_both(b, 1e-4, 1e-5);
    // One product with the GELU in its epilogue: Kiln's packed GEMM (fast_math), else oneDNN's.
    EXPECT_EQ(count_ops(r.cpu, "cpu::matmul") + count_ops(r.cpu, "cpu::packed_gemm"), 1u) << text(r.cpu);
    EXPECT_NE(text(r.cpu).find("gelu_erf"), std::string::npos) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::binary") + count_ops(r.cpu, "cpu::eltwise"), 0u) << text(r.cpu);
}

TEST(cpu_fusion, matmul_gelu_without_its_half_then_matmul) {
    KILN_CPU_NEEDS_OPS("add", "mul", "erf");
    // BERT's and ViT's MLP after the simplifier: x * (1 + erf(x * 0.7071)) feeds the second
    // matmul, whose result is then halved.
    builder b;
    auto x = b.param("x", {1, 13, 32});
    auto y = b.op("add", {b.op("matmul", {x, b.constant({32, 48}, 0.3f)}), b.constant({48})});
    auto e = b.op("erf", {b.op("mul", {y, b.scalar(0.70710678f)})});
    auto g = b.op("mul", {y, b.op("add", {e, b.scalar(1.0f)})});
    auto z = b.op("mul", {b.op("matmul", {g, b.constant({48, 32}, 0.3f)}), b.scalar(0.5f)});
    b.ret({z});
    for (bool fast : {true, false}) {
        compile_options o;
        o.fast_math = fast;
        auto r = run_both(b, 1e-4, 1e-5, o);
        EXPECT_EQ(count_ops(r.cpu, "cpu::matmul") + count_ops(r.cpu, "cpu::packed_gemm"), 2u) << text(r.cpu);
        EXPECT_NE(text(r.cpu).find("gelu_erf"), std::string::npos) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::fused_kernel"), 0u) << text(r.cpu);
    }
}

TEST(cpu_fusion, attention_scores_scale_and_mask) {
    KILN_CPU_NEEDS_OPS("add", "div");
    builder b;
    auto q = b.param("q", {1, 3, 13, 8});
    auto k = b.param("k", {1, 3, 8, 13});
    auto mask = b.param("mask", {1, 1, 1, 13});
    auto s = b.op("add", {b.op("div", {b.op("matmul", {q, k}), b.scalar(2.8284271f)}), mask});
    b.ret({b.op("softmax", value::object{{"axis", value(3)}}, {s})});
    auto r = run_both(b, 1e-4, 1e-6);
    EXPECT_EQ(count_ops(r.cpu, "cpu::matmul"), 1u);
    EXPECT_EQ(count_ops(r.cpu, "cpu::softmax"), 1u);
}

TEST(cpu_fusion, not_when_the_intermediate_has_another_user) {
    KILN_CPU_NEEDS_OPS("relu", "add");
    builder b;
    auto x = b.param("x", {1, 8, 13, 11});
    auto y = b.op("convolution", conv3x3(), {x, b.constant({16, 8, 3, 3}, 0.3f), b.constant({16})});
    auto z = b.op("relu", {y});
    b.ret({b.op("add", {z, y})});
    auto r = run_both(b, 1e-4, 1e-5);
    // The relu reads y, which the add needs unchanged.
    EXPECT_EQ(count_ops(r.cpu, "cpu::eltwise"), 1u) << text(r.cpu);
}

TEST(cpu_fusion, not_when_the_intermediate_is_an_output) {
    KILN_CPU_NEEDS_OPS("relu");
    builder b;
    auto x = b.param("x", {1, 8, 13, 11});
    auto y = b.op("convolution", conv3x3(), {x, b.constant({16, 8, 3, 3}, 0.3f)});
    b.ret({y, b.op("relu", {y})});
    auto r = run_both(b, 1e-4, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::eltwise"), 1u) << text(r.cpu);
}

TEST(cpu_fusion, attention_context_is_written_in_transposed_order) {
    // probs x v -> [b, heads, seq, d], transposed to [b, seq, heads, d] and reshaped to
    // [b, seq, heads*d]: the matmul writes through the transposed strides, so no copy is left.
    KILN_CPU_NEEDS_OPS("transpose", "reshape");
    builder b;
    auto p = b.param("p", {2, 3, 13, 11});
    auto v = b.param("v", {2, 3, 11, 8});
    auto c = b.op("matmul", {p, v});
    auto t = b.op("transpose", {{"perm", {0, 2, 1, 3}}}, {c});
    auto r2 = b.op("reshape", {{"dims", {2, 13, 24}}}, {t});
    b.ret({b.op("relu", {r2})});
    auto r = run_both(b, 1e-5, 1e-6);
    EXPECT_EQ(count_ops(r.cpu, "cpu::matmul"), 1u);
    EXPECT_EQ(count_ops(r.cpu, "cpu::reorder"), 0u) << text(r.cpu);
}
