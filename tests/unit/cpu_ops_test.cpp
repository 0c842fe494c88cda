// Each op the cpu target lowers to oneDNN, against the ref target, on random non-zero
// data with odd sizes.
#include "cpu_test_util.hpp"

#include <kiln/builtin_ops.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

struct conv_case {
    std::vector<std::size_t> x, w;
    value attrs;
    bool bias;
};

void check_conv(const conv_case& c, const char* op = "convolution") {
    builder b;
    auto x = b.param("x", c.x);
    auto w = b.constant(c.w, 0.5f);
    std::vector<instruction_ref> args{x, w};
    if (c.bias) {
        const std::size_t m = std::string(op) == "convolution" ? c.w[0] : c.w[1] * c.attrs.at("group").get_int64();
        args.push_back(b.constant({m}));
    }
    b.ret({b.op(op, c.attrs, args)});
    auto r = run_both(b, 1e-4, 1e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::convolution"), 1u) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

value conv_attrs(std::vector<std::int64_t> pad, std::vector<std::int64_t> stride, std::vector<std::int64_t> dil,
                 std::int64_t group) {
    value::array p(pad.begin(), pad.end()), s(stride.begin(), stride.end()), d(dil.begin(), dil.end());
    return value::object{{"padding", value(p)}, {"stride", value(s)}, {"dilation", value(d)}, {"group", value(group)}};
}

}  // namespace

TEST(cpu_ops, convolution_plain) {
    check_conv({{1, 3, 13, 13}, {8, 3, 3, 3}, conv_attrs({1, 1, 1, 1}, {1, 1}, {1, 1}, 1), true});
}

TEST(cpu_ops, convolution_strided_dilated_asymmetric_padding) {
    check_conv({{2, 5, 17, 13}, {7, 5, 3, 5}, conv_attrs({0, 2, 1, 1}, {2, 3}, {2, 1}, 1), true});
}

TEST(cpu_ops, convolution_groups_and_depthwise) {
    check_conv({{1, 6, 15, 15}, {9, 2, 3, 3}, conv_attrs({1, 1, 1, 1}, {1, 1}, {1, 1}, 3), true});
    check_conv({{1, 16, 13, 13}, {16, 1, 3, 3}, conv_attrs({1, 1, 1, 1}, {2, 2}, {1, 1}, 16), false});
    check_conv({{1, 8, 11, 11}, {24, 1, 5, 5}, conv_attrs({2, 2, 2, 2}, {1, 1}, {1, 1}, 8), true});
}

TEST(cpu_ops, convolution_1x1_and_1d_and_3d) {
    check_conv({{1, 32, 7, 9}, {13, 32, 1, 1}, conv_attrs({0, 0, 0, 0}, {1, 1}, {1, 1}, 1), false});
    check_conv({{2, 4, 27}, {6, 4, 3}, conv_attrs({1, 1}, {2}, {1}, 1), true});
    check_conv({{1, 3, 5, 7, 9}, {4, 3, 3, 3, 3}, conv_attrs({1, 1, 1, 0, 0, 0}, {1, 2, 1}, {1, 1, 1}, 1), true});
}

TEST(cpu_ops, convolution_with_run_time_weights) {
    builder b;
    auto x = b.param("x", {1, 4, 9, 9});
    auto w = b.param("w", {6, 4, 3, 3});
    b.ret({b.op("convolution", conv_attrs({1, 1, 1, 1}, {1, 1}, {1, 1}, 1), {x, w})});
    auto r = run_both(b, 1e-4, 1e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::convolution"), 1u);
}

TEST(cpu_ops, deconvolution) {
    auto attrs = [](std::vector<std::int64_t> pad, std::vector<std::int64_t> stride, std::int64_t group,
                    std::vector<std::int64_t> out_pad) {
        value v = conv_attrs(pad, stride, {1, 1}, group);
        v["output_padding"] = value(value::array(out_pad.begin(), out_pad.end()));
        return v;
    };
    check_conv({{1, 4, 7, 9}, {4, 6, 3, 3}, attrs({1, 1, 1, 1}, {2, 2}, 1, {1, 0}), true}, "deconvolution");
    check_conv({{2, 6, 5, 5}, {6, 2, 4, 4}, attrs({0, 0, 0, 0}, {2, 2}, 3, {0, 0}), false}, "deconvolution");
    check_conv({{1, 3, 13, 13}, {3, 5, 3, 3}, attrs({1, 1, 1, 1}, {1, 1}, 1, {0, 0}), true}, "deconvolution");
}

TEST(cpu_ops, matmul_shapes) {
    struct mm_case {
        std::vector<std::size_t> a, b;
        bool constant_b;
    };
    for (const auto& c : std::vector<mm_case>{{{13, 27}, {27, 5}, true},
                                              {{3, 13, 27}, {27, 17}, true},
                                              {{2, 3, 13, 8}, {2, 3, 8, 11}, false},
                                              {{2, 3, 13, 8}, {1, 3, 8, 11}, false},
                                              {{3, 13, 8}, {8, 11}, false}}) {
        builder b;
        auto a = b.param("a", c.a);
        auto w = c.constant_b ? b.constant(c.b) : b.param("b", c.b);
        b.ret({b.op("matmul", {a, w})});
        auto r = run_both(b, 1e-4, 1e-4);
        // Constant weights with 2 rows or more go to cpu::packed_gemm (packed_gemm.hpp).
        EXPECT_EQ(count_ops(r.cpu, "cpu::matmul") + count_ops(r.cpu, "cpu::packed_gemm"), 1u) << text(r.cpu);
    }
}

TEST(cpu_ops, gemm_transposes_alpha_beta) {
    for (bool ta : {false, true})
        for (bool tb : {false, true})
            for (float beta : {0.0f, 1.0f, 0.5f}) {
                builder b;
                auto a = b.param("a", ta ? std::vector<std::size_t>{9, 13} : std::vector<std::size_t>{13, 9});
                auto w = b.constant(tb ? std::vector<std::size_t>{7, 9} : std::vector<std::size_t>{9, 7});
                auto cc = beta == 0.5f ? b.constant({13, 7}) : b.constant({7});
                value attrs = value::object{{"alpha", value(ta ? 1.5f : 1.0f)},
                                            {"beta", value(beta)},
                                            {"trans_a", value(ta)},
                                            {"trans_b", value(tb)}};
                b.ret({b.op("gemm", attrs, {a, w, cc})});
                auto r = run_both(b, 1e-4, 1e-4);
                EXPECT_EQ(count_ops(r.cpu, "cpu::matmul") + count_ops(r.cpu, "cpu::packed_gemm"), 1u) << text(r.cpu);
            }
}

TEST(cpu_ops, pooling) {
    auto pool = [](std::int64_t mode, std::vector<std::int64_t> k, std::vector<std::int64_t> s,
                   std::vector<std::int64_t> pad, bool ceil, bool include_pad) {
        return value::object{{"mode", value(mode)},
                             {"lengths", value(value::array(k.begin(), k.end()))},
                             {"stride", value(value::array(s.begin(), s.end()))},
                             {"padding", value(value::array(pad.begin(), pad.end()))},
                             {"ceil_mode", value(ceil)},
                             {"count_include_pad", value(include_pad)}};
    };
    const std::vector<value> cases{pool(1, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, false),
                                   pool(1, {2, 3}, {2, 2}, {0, 0, 0, 0}, true, false),
                                   pool(0, {3, 3}, {2, 2}, {1, 1, 1, 1}, false, true),
                                   pool(0, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, false),
                                   pool(0, {5, 3}, {1, 2}, {2, 0, 2, 1}, false, false),
                                   value::object{{"mode", value(0)}, {"global", value(true)}},
                                   value::object{{"mode", value(1)}, {"global", value(true)}}};
    for (const auto& attrs : cases) {
        builder b;
        auto x = b.param("x", {2, 5, 13, 11});
        b.ret({b.op("pooling", attrs, {x})});
        auto r = run_both(b, 1e-5, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::pooling"), 1u) << attrs.to_string() << text(r.cpu);
    }
    // Averages counting padding that no window reaches (MaxViT's AvgPool2d(3, 2, 1) on even
    // sizes: the last window ends at the last row) are oneDNN's too; with ceil_mode a window
    // runs past the padding and ONNX divides by less than the window: the reference kernel.
    for (bool ceil : {false, true}) {
        builder b;
        auto x = b.param("x", {1, 4, 12, 10});
        b.ret({b.op("pooling", pool(0, {3, 3}, {2, 2}, {1, 1, 1, 1}, ceil, true), {x})});
        auto r = run_both(b, 1e-5, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::pooling"), ceil ? 0u : 1u) << text(r.cpu);
    }
}

TEST(cpu_ops, softmax_and_log_softmax) {
    for (const char* n : {"softmax", "log_softmax"})
        for (std::int64_t axis : {0, 1, 2}) {
            builder b;
            auto x = b.param("x", {3, 13, 27}, 4.0f);
            b.ret({b.op(n, value::object{{"axis", value(axis)}}, {x})});
            auto r = run_both(b, 1e-5, 1e-6);
            EXPECT_EQ(count_ops(r.cpu, "cpu::softmax"), 1u);
        }
}

TEST(cpu_ops, layer_norm) {
    for (std::int64_t axis : {2, 1}) {
        builder b;
        auto x = b.param("x", {3, 5, 27}, 3.0f);
        std::vector<std::size_t> p = axis == 2 ? std::vector<std::size_t>{27} : std::vector<std::size_t>{5, 27};
        auto scale = b.constant(p);
        auto bias = b.constant(p);
        b.ret({b.op("layer_norm", value::object{{"axis", value(axis)}, {"epsilon", value(1e-5f)}}, {x, scale, bias})});
        auto r = run_both(b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::layer_norm"), 1u);
    }
}

// ConvNeXt's LayerNorm over the channels of x.permute(0, 2, 3, 1): the normalized axis of the
// view has stride H*W, which oneDNN does not take; the input is copied row-major and the norm
// stays on oneDNN (it once ran on the reference kernel: 28.5 of 61 ms in ConvNeXt-T).
TEST(cpu_ops, layer_norm_over_a_permuted_view) {
    builder b;
    auto x = b.param("x", {1, 24, 7, 9}, 3.0f);
    auto xt = b.op("transpose", value::object{{"perm", value(value::array{0, 2, 3, 1})}}, {x});
    auto scale = b.constant({24});
    auto bias = b.constant({24});
    b.ret({b.op("layer_norm", value::object{{"axis", value(std::int64_t{3})}, {"epsilon", value(1e-6f)}}, {xt, scale, bias})});
    auto r = run_both(b, 1e-4, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::layer_norm"), 1u);
    EXPECT_EQ(count_ops(r.cpu, "ref::kernel"), 0u);
}

TEST(cpu_ops, batch_norm_lrn) {
    {
        builder b;
        auto x = b.param("x", {2, 7, 5, 3});
        auto scale = b.constant({7});
        auto bias = b.constant({7});
        auto mean = b.constant({7});
        auto var = b.m->add_literal(literal(shape(type::float32, {7}), std::vector<float>{1, 2, .5f, .7f, 3, .1f, 1}));
        b.ret({b.op("batch_norm_inference", value::object{{"epsilon", value(1e-3f)}}, {x, scale, bias, mean, var})});
        auto r = run_both(b, 1e-5, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::batch_norm"), 1u);
    }
    for (std::int64_t size : {3, 5}) {
        builder b;
        auto x = b.param("x", {2, 13, 5, 7});
        b.ret({b.op("lrn",
                    value::object{{"alpha", value(1e-2f)}, {"beta", value(0.75f)}, {"bias", value(2.0f)},
                                  {"size", value(size)}},
                    {x})});
        auto r = run_both(b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::lrn"), 1u);
    }
}

TEST(cpu_ops, reductions) {
    // reduce_max/min never go to oneDNN (it reduces a row of -inf to -FLT_MAX), and neither
    // do the reductions oneDNN would run on its reference code (here l1, l2, sum_square over
    // axes 1 and 2): generated kernels take them. All must agree with ref.
    for (const char* n : {"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_l1",
                          "reduce_l2", "reduce_sum_square"})
        for (bool keep : {true, false}) {
            const bool on_dnnl = n != std::string("reduce_max") && n != std::string("reduce_min");
            builder b;
            auto x = b.param("x", {3, 13, 5}, n == std::string("reduce_prod") ? 1.5f : 1.0f);
            b.ret({b.op(n, value::object{{"axes", value(value::array{1, 2})}, {"keepdims", value(keep)}}, {x})});
            auto r = run_both(b, 1e-4, 1e-5);
            EXPECT_EQ(count_ops(r.cpu, "cpu::reduction") + count_ops(r.cpu, "cpu::fused_kernel"), 1u) << n << text(r.cpu);
            if (!on_dnnl) {
                EXPECT_EQ(count_ops(r.cpu, "cpu::reduction"), 0u) << n;
            }
            EXPECT_EQ(count_ops(r.cpu, "ref::kernel"), 0u) << n << text(r.cpu);
        }
}

TEST(cpu_ops, concat) {
    for (std::int64_t axis : {0, 1, 3}) {
        builder b;
        std::vector<std::size_t> l1{2, 3, 5, 7}, l2{2, 3, 5, 7};
        l2[static_cast<std::size_t>(axis)] = 4;
        auto x = b.param("x", l1);
        auto y = b.param("y", l2);
        b.ret({b.op("concat", value::object{{"axis", value(axis)}}, {x, y, x})});
        auto r = run_both(b, 0, 0);
        // Row-major inputs: Kiln's block copies (concat_plain.hpp), not oneDNN's concat.
        EXPECT_EQ(count_ops(r.cpu, "cpu::concat_plain"), 1u) << text(r.cpu);
    }
}

TEST(cpu_ops, resize_where_exact) {
    auto opts = [](const char* mode, const char* ctm, const char* nearest) {
        return value::object{{"mode", value(mode)},
                             {"coordinate_transformation_mode", value(ctm)},
                             {"nearest_mode", value(nearest)}};
    };
    struct resize_case {
        value options;
        std::vector<double> scales;
        bool lowered;
    };
    const std::vector<resize_case> cases{
        {opts("nearest", "asymmetric", "floor"), {1, 1, 2, 3}, true},
        {opts("nearest", "half_pixel", "round_prefer_floor"), {1, 1, 3, 2}, true},
        {opts("linear", "half_pixel", "round_prefer_floor"), {1, 1, 2, 2}, true},
        {opts("linear", "pytorch_half_pixel", "round_prefer_floor"), {1, 1, 0.5, 3}, true},
        {opts("nearest", "align_corners", "round_prefer_floor"), {1, 1, 2, 2}, false}};
    for (const auto& c : cases) {
        builder b;
        auto x = b.param("x", {1, 3, 6, 5});
        value::array sc(c.scales.begin(), c.scales.end());
        b.ret({b.op("resize", value::object{{"options", c.options}, {"scales", value(sc)}}, {x})});
        auto r = run_both(b, 1e-5, 1e-6);
        EXPECT_EQ(count_ops(r.cpu, "cpu::resampling"), c.lowered ? 1u : 0u) << c.options.to_string();
    }
}

TEST(cpu_ops, eltwise_and_binary) {
    KILN_CPU_NEEDS_OPS("relu", "add", "sigmoid", "clip");
    builder b;
    auto x = b.param("x", {2, 13, 7}, 3.0f);
    auto y = b.param("y", {13, 1});
    auto c = b.param("c", {2, 13, 7});
    auto s1 = b.op("sigmoid", {x});
    auto s2 = b.op("tanh", {s1});
    auto s3 = b.op("clip", {s2, b.scalar(-0.3f), b.scalar(0.4f)});
    auto a1 = b.op("mul", {y, s3});  // broadcast first operand: swapped
    auto a2 = b.op("sub", {a1, c});
    auto a3 = b.op("div", {a2, y});
    auto a4 = b.op("max", {a3, c});
    b.ret({b.op("leaky_relu", value::object{{"alpha", value(0.1f)}}, {a4})});
    auto r = run_both(b, 1e-5, 1e-6);
    EXPECT_EQ(count_ops(r.cpu, "cpu::eltwise"), 4u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::binary"), 4u) << text(r.cpu);
}

// Swin-T's shifted-window mask: scores [1, windows, heads, 49, 49] + mask [1, windows, 1,
// 49, 49], broadcast over a middle axis. oneDNN 2.6's binary has only its reference code
// for that (48.7 ms of a 90 ms run); the lowering leaves it to a generated kernel.
TEST(cpu_ops, binary_broadcast_over_a_middle_axis_is_a_generated_kernel) {
    KILN_CPU_NEEDS_OPS("add");
    builder b;
    auto x = b.param("x", {1, 6, 3, 11, 11}, 3.0f);
    auto mask = b.param("mask", {1, 6, 1, 11, 11});
    b.ret({b.op("add", {x, mask})});
    auto r = run_both(b, 0, 0);
    EXPECT_EQ(count_ops(r.cpu, "cpu::binary"), 0u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::fused_kernel"), 1u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "ref::kernel"), 0u) << text(r.cpu);
}

TEST(cpu_ops, one_dimensional_chains_and_scalars) {
    KILN_CPU_NEEDS_OPS("selu", "hard_sigmoid", "sub");
    // oneDNN 2.6 gets eltwise post-ops wrong on 1-D tensors (the lowering views them
    // as [1, n]) and computes nothing on 0-D ones (they stay on the reference kernels).
    builder b;
    auto x = b.param("x", {19}, 3.0f);
    auto s = b.param("s", {});
    auto y1 = b.op("selu", value::object{{"alpha", value(2.0f)}, {"gamma", value(3.0f)}}, {x});
    auto y2 = b.op("hard_sigmoid", value::object{{"alpha", value(0.5f)}, {"beta", value(0.6f)}}, {x});
    auto y3 = b.op("sub", {s, b.scalar(1.0f)});
    b.ret({y1, y2, y3});
    auto r = run_both(b, 1e-5, 1e-6);
    EXPECT_EQ(count_ops(r.cpu, "cpu::eltwise"), 2u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::binary"), 0u) << text(r.cpu);
}

TEST(cpu_ops, lstm_forward_and_reverse) {
    // oneDNN's kernel; cpu_lstm_kernel_test covers Kiln's own (the default).
    test::env_override dnnl("KILN_CPU_LSTM", "dnnl");
    for (std::int64_t dir : {0, 1}) {
        builder b;
        auto x = b.param("x", {7, 3, 5});
        auto w = b.constant({1, 44, 5}, 0.5f);
        auto r = b.constant({1, 44, 11}, 0.3f);
        auto bias = b.constant({1, 88}, 0.5f);
        auto h0 = b.param("h0", {1, 3, 11});
        auto c0 = b.param("c0", {1, 3, 11});
        value attrs = value::object{{"hidden_size", value(11)},     {"direction", value(dir)},
                                    {"has_bias", value(true)},      {"has_initial_h", value(true)},
                                    {"has_initial_c", value(true)}};
        auto l = b.op("lstm", attrs, {x, w, r, bias, h0, c0});
        b.ret({b.m->add_instruction(builtin::get_tuple_elem{0}, {l})});
        auto res = run_both(b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(res.cpu, "cpu::lstm"), 1u) << text(res.cpu);
        EXPECT_EQ(count_ops(res.cpu, "lstm"), 0u) << text(res.cpu);
    }
}

// ONNX GRUs on oneDNN's GRU primitive (cpu::gru): every direction, both reset forms
// (linear_before_reset 0: oneDNN's gru; 1, what PyTorch exports: lbr_gru), with and
// without bias and initial state, Y and Y_h both read; hidden 20 (not a multiple of 16).
TEST(cpu_ops, gru_directions_and_reset_forms) {
    const std::size_t T = 6, N = 2, I = 5, H = 20;
    for (std::int64_t dir : {0, 1, 2})
        for (bool lbr : {false, true})
            for (bool extras : {false, true}) {
                SCOPED_TRACE("direction " + std::to_string(dir) + (lbr ? " lbr" : "") + (extras ? " bias, h0" : ""));
                const std::size_t D = dir == 2 ? 2 : 1;
                builder b;
                auto x = b.param("x", {T, N, I});
                std::vector<instruction_ref> args{x, b.constant({D, 3 * H, I}, 0.4f), b.constant({D, 3 * H, H}, 0.3f)};
                if (extras) {
                    args.push_back(b.constant({D, 6 * H}, 0.5f));
                    args.push_back(b.param("h0", {D, N, H}));
                }
                value attrs = value::object{{"hidden_size", value(static_cast<std::int64_t>(H))},        {"direction", value(dir)},
                                            {"has_bias", value(extras)},       {"has_initial_h", value(extras)},
                                            {"linear_before_reset", value(lbr)}};
                auto g = b.op("gru", attrs, args);
                auto y = b.m->add_instruction(builtin::get_tuple_elem{0}, {g});
                auto yh = b.m->add_instruction(builtin::get_tuple_elem{1}, {g});
                b.ret({y, yh});
                auto res = run_both(b, 1e-4, 1e-5);
                EXPECT_EQ(count_ops(res.cpu, "cpu::gru"), 1u) << text(res.cpu);
                EXPECT_EQ(count_ops(res.cpu, "gru"), 0u) << text(res.cpu);
                EXPECT_TRUE(ref_kernels(res.cpu).empty()) << text(res.cpu);
            }
}

// Only one of the outputs read (here Y_h, of a bidirectional GRU, and Y of a reverse one),
// the other's tuple element left unused.
TEST(cpu_ops, gru_one_output_used) {
    for (std::size_t index : {0, 1}) {
        builder b;
        const std::size_t D = index == 1 ? 2 : 1;
        auto x = b.param("x", {4, 2, 3});
        value attrs = value::object{{"hidden_size", value(7)},
                                    {"direction", value(std::int64_t(index == 1 ? 2 : 1))},
                                    {"linear_before_reset", value(true)}};
        auto g = b.op("gru", attrs, {x, b.constant({D, 21, 3}, 0.5f), b.constant({D, 21, 7}, 0.5f)});
        b.m->add_instruction(builtin::get_tuple_elem{1 - index}, {g});
        auto out = b.m->add_instruction(builtin::get_tuple_elem{index}, {g});
        b.ret({b.op("add", {out, out})});
        auto res = run_both(b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(res.cpu, "cpu::gru"), 1u) << text(res.cpu);
        EXPECT_EQ(count_ops(res.cpu, "gru"), 0u) << text(res.cpu);
    }
}

// ONNX RNNs on oneDNN's vanilla RNN primitive (cpu::rnn): every direction, the three
// activations it has (DeepSpeech's is Relu), with and without bias and initial state.
TEST(cpu_ops, rnn_directions_and_activations) {
    const std::size_t T = 7, N = 2, I = 5, H = 16;
    for (std::int64_t dir : {0, 1, 2})
        for (const char* f : {"Relu", "Tanh", "Sigmoid", ""})
            for (bool extras : {false, true}) {
                SCOPED_TRACE("direction " + std::to_string(dir) + " " + f + (extras ? " bias, h0" : ""));
                const std::size_t D = dir == 2 ? 2 : 1;
                builder b;
                auto x = b.param("x", {T, N, I});
                std::vector<instruction_ref> args{x, b.constant({D, H, I}, 0.4f), b.constant({D, H, H}, 0.3f)};
                if (extras) {
                    args.push_back(b.constant({D, 2 * H}, 0.5f));
                    args.push_back(b.param("h0", {D, N, H}));
                }
                value::array fs;
                if (*f)
                    for (std::size_t d = 0; d < D; ++d) fs.push_back(value(std::string(f)));
                value attrs = value::object{{"hidden_size", value(static_cast<std::int64_t>(H))}, {"direction", value(dir)},
                                            {"has_bias", value(extras)}, {"has_initial_h", value(extras)},
                                            {"activations", value(fs)}};
                auto g = b.op("rnn", attrs, args);
                auto y = b.m->add_instruction(builtin::get_tuple_elem{0}, {g});
                auto yh = b.m->add_instruction(builtin::get_tuple_elem{1}, {g});
                b.ret({y, yh});
                auto res = run_both(b, 1e-4, 1e-5);
                EXPECT_EQ(count_ops(res.cpu, "cpu::rnn"), 1u) << text(res.cpu);
                EXPECT_EQ(count_ops(res.cpu, "rnn"), 0u) << text(res.cpu);
                EXPECT_TRUE(ref_kernels(res.cpu).empty()) << text(res.cpu);
            }
}

// What oneDNN's vanilla cell cannot compute stays on the reference kernel, right: another
// activation per direction, or a clip.
TEST(cpu_ops, rnn_the_primitive_cannot_compute_stays_on_ref) {
    for (bool clip : {false, true}) {
        builder b;
        auto x = b.param("x", {4, 1, 3});
        value::array fs{value(std::string("Relu")), value(std::string(clip ? "Relu" : "Tanh"))};
        value attrs = value::object{{"hidden_size", value(6)}, {"direction", value(std::int64_t(2))},
                                    {"activations", value(fs)}, {"clip", value(clip ? 0.5f : 0.0f)}};
        auto g = b.op("rnn", attrs, {x, b.constant({2, 6, 3}, 0.5f), b.constant({2, 6, 6}, 0.5f)});
        b.ret({b.m->add_instruction(builtin::get_tuple_elem{0}, {g})});
        auto res = run_both(b, 1e-4, 1e-5);
        EXPECT_EQ(count_ops(res.cpu, "cpu::rnn"), 0u) << text(res.cpu);
    }
}

TEST(cpu_ops, gather_at_a_constant_index_and_reshape_copies) {
    // ViT's split of the fused QKV projection: a transposed view, then gather(0, i).
    for (std::int64_t index : {0, 2, -1}) {
        builder b;
        auto x = b.param("x", {1, 13, 3, 5, 7});
        auto t = b.op("transpose", value::object{{"perm", value(value::array{2, 0, 3, 1, 4})}}, {x});
        auto i = b.m->add_literal(literal(shape(type::int64), std::vector<std::int64_t>{index}));
        auto g = b.op("gather", value::object{{"axis", value(0)}}, {t, i});
        // A reshape of the (non-row-major) transposed result copies it.
        auto t2 = b.op("transpose", value::object{{"perm", value(value::array{0, 2, 1, 3})}}, {g});
        b.ret({g, b.op("reshape", value::object{{"dims", value(value::array{1, 13, 35})}}, {t2})});
        auto r = run_both(b, 0, 0);
        EXPECT_EQ(count_ops(r.cpu, "cpu::reorder"), 2u) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    }
    builder b;
    auto x = b.param("x", {4, 6});
    auto i = b.m->add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{3}));
    b.ret({b.op("gather", value::object{{"axis", value(1)}}, {x, i})});
    auto r = run_both(b, 0, 0);
    EXPECT_EQ(count_ops(r.cpu, "cpu::reorder"), 1u) << text(r.cpu);
}
