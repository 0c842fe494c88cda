// fuse_qdq as before/after text (pass_text_util.hpp), and the numbers: the fused integer
// op against the DequantizeLinear -> product -> QuantizeLinear it replaces, within one
// output level (the float product rounds differently from the exact integer one).
#include "pass_text_util.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/fuse_qdq.hpp"
#include "passes_test_util.hpp"

using namespace kiln;
using pass_text::expect_rewrite;
using pass_text::expect_unchanged;

namespace {

void fuse(module& m) {
    fuse_qdq{}.apply(m);
    dead_code_elimination{}.apply(m);
}

// Shared by MobileNet's shape: uint8 activations, per-channel int8 weights, an int32 bias
// whose scale is x_scale * w_scale, a Relu folded into the saturation.
const char* conv_group = R"(
        module main
          x = @param -> uint8[1, 2, 4, 4]
          xs = @literal{float32[] {0.5}}
          xz = @literal{uint8[] {128}}
          xd = dequantize_linear(x, xs, xz)
          w = @literal{int8[3, 2, 1, 1] {1, -2, 3, -4, 5, -6}}
          ws = @literal{float32[3] {0.25, 0.5, 0.125}}
          wz = @literal{int8[3] {0, 0, 0}}
          wd = dequantize_linear{axis=0}(w, ws, wz)
          b = @literal{int32[3] {4, -8, 16}}
          bs = @literal{float32[3] {0.125, 0.25, 0.0625}}
          bz = @literal{int32[3] {0, 0, 0}}
          bd = dequantize_linear{axis=0}(b, bs, bz)
          c = convolution(xd, wd, bd)
          r = relu(c)
          ys = @literal{float32[] {0.25}}
          yz = @literal{uint8[] {10}}
          y = quantize_linear(r, ys, yz)
          @return(y)
    )";

}  // namespace

TEST(fuse_qdq_text, conv_relu_quantize_becomes_one_integer_convolution) {
    // out_type 5 is uint8; y_min 10 is the Relu: nothing below the zero point.
    expect_rewrite(conv_group, fuse, R"(
        module main
          x = @param -> uint8[1, 2, 4, 4]
          w = @literal{int8[3, 2, 1, 1] {1, -2, 3, -4, 5, -6}}
          b = @literal{int32[3] {4, -8, 16}}
          y = quant_convolution{x_scale=0.5, x_zero_point=128, w_scales=[0.25, 0.5, 0.125], has_bias=true, out_type=5, y_scale=0.25, y_zero_point=10, y_min=10, y_max=255}(x, w, b)
          @return(y)
    )");
    passes_test::check_same_results(pass_text::parse(conv_group), fuse, 0, 1.0);
}

TEST(fuse_qdq_text, per_consumer_pairs_before_a_matmul_fuse_with_a_float_result_and_bias) {
    // BERT's shape: a Q/DQ pair of its own before each operand; the bias Add folds in, and
    // the int8 activation becomes uint8 with its zero point + 128 (the same x - x_zero_point).
    const char* text = R"(
        module main
          a = @param -> float32[2, 3]
          s = @literal{float32[] {0.125}}
          z = @literal{int8[] {-3}}
          aq = quantize_linear(a, s, z)
          ad = dequantize_linear(aq, s, z)
          w = @literal{int8[3, 2] {1, -2, 3, -4, 5, -6}}
          ws = @literal{float32[2] {0.25, 0.5}}
          wz = @literal{int8[2] {0, 0}}
          wd = dequantize_linear(w, ws, wz)
          m = matmul(ad, wd)
          bias = @literal{float32[2] {1, -1}}
          y = add(m, bias)
          @return(y)
    )";
    expect_rewrite(text, fuse, R"(
        module main
          a = @param -> float32[2, 3]
          s = @literal{float32[] {0.125}}
          z = @literal{uint8[] {125}}
          aq = quantize_linear(a, s, z)
          w = @literal{int8[3, 2] {1, -2, 3, -4, 5, -6}}
          bias = @literal{float32[2] {1, -1}}
          y = quant_dot{x_scale=0.125, x_zero_point=125, w_scales=[0.25, 0.5], has_bias=true}(aq, w, bias)
          @return(y)
    )");
    passes_test::check_same_results(pass_text::parse(text), fuse, 1e-5, 1e-5);
}

TEST(fuse_qdq_text, per_axis_activation_scales_stay) {
    expect_unchanged(R"(
        module main
          x = @param -> uint8[2, 3]
          xs = @literal{float32[3] {0.5, 0.25, 1}}
          xz = @literal{uint8[3] {1, 2, 3}}
          xd = dequantize_linear(x, xs, xz)
          w = @param -> float32[3, 2]
          m = matmul(xd, w)
          @return(m)
    )", fuse);
}

TEST(fuse_qdq_text, residual_add_between_quantized_tensors_becomes_quant_add) {
    const char* text = R"(
        module main
          a = @param -> uint8[2, 3]
          b = @param -> uint8[2, 3]
          sa = @literal{float32[] {0.5}}
          za = @literal{uint8[] {100}}
          sb = @literal{float32[] {0.25}}
          zb = @literal{uint8[] {130}}
          ad = dequantize_linear(a, sa, za)
          bd = dequantize_linear(b, sb, zb)
          s = add(ad, bd)
          sy = @literal{float32[] {0.75}}
          zy = @literal{uint8[] {120}}
          y = quantize_linear(s, sy, zy)
          @return(y)
    )";
    expect_rewrite(text, fuse, R"(
        module main
          a = @param -> uint8[2, 3]
          b = @param -> uint8[2, 3]
          y = quant_add{a_scale=0.5, a_zero_point=100, b_scale=0.25, b_zero_point=130, y_scale=0.75, y_zero_point=120, out_type=5}(a, b)
          @return(y)
    )");
    // The ONNX ops' float32 steps exactly.
    passes_test::check_same_results(pass_text::parse(text), fuse, 0, 0);
}

TEST(fuse_qdq_text, max_pool_between_a_dq_and_a_q_of_the_same_parameters_runs_on_8_bits) {
    const char* text = R"(
        module main
          x = @param -> uint8[1, 2, 5, 5]
          s = @literal{float32[] {0.125}}
          z = @literal{uint8[] {7}}
          xd = dequantize_linear(x, s, z)
          p = pooling{mode=1, lengths=[3, 3], stride=[2, 2], padding=[1, 1, 1, 1]}(xd)
          s2 = @literal{float32[] {0.125}}
          z2 = @literal{uint8[] {7}}
          y = quantize_linear(p, s2, z2)
          @return(y)
    )";
    expect_rewrite(text, fuse, R"(
        module main
          x = @param -> uint8[1, 2, 5, 5]
          y = pooling{mode=1, lengths=[3, 3], stride=[2, 2], padding=[1, 1, 1, 1]}(x)
          @return(y)
    )");
    passes_test::check_same_results(pass_text::parse(text), fuse, 0, 0);
    // Another scale, or an average, changes the values: those stay.
    for (const std::string other : {"0.25", "avg"}) {
        std::string t = text;
        if (other == "avg") t.replace(t.find("mode=1"), 6, "mode=0");
        else t.replace(t.find("{0.125}}\n          z2"), 7, "{0.25}");
        auto m = pass_text::parse(t);
        fuse(*m.get_main_module());
        EXPECT_NE(m.get_main_module()->to_string().find("quantize_linear"), std::string::npos) << other;
    }
}

namespace {

// A bottleneck's end as quantize_int8 writes it (int8_options::fuse_residual): the last
// convolution's float result goes straight into the add; the residual r has its Q/DQ.
// IMPORTED: as a quantized ONNX model has it, the convolution's result Q'd and DQ'd first.
std::string residual_group(bool imported) {
    std::string t = R"(
        module main
          x = @param -> uint8[1, 2, 3, 3]
          r = @param -> uint8[1, 3, 3, 3]
          xs = @literal{float32[] {0.5}}
          xz = @literal{uint8[] {128}}
          xd = dequantize_linear(x, xs, xz)
          w = @literal{int8[3, 2, 1, 1] {1, -2, 3, -4, 5, -6}}
          ws = @literal{float32[3] {0.25, 0.5, 0.125}}
          wz = @literal{int8[3] {0, 0, 0}}
          wd = dequantize_linear{axis=0}(w, ws, wz)
          b = @literal{float32[3] {0.5, -1, 2}}
          c = convolution(xd, wd, b)
          rs = @literal{float32[] {0.75}}
          rz = @literal{uint8[] {3}}
          rd = dequantize_linear(r, rs, rz)
)";
    if (imported)
        t += R"(
          cs = @literal{float32[] {0.375}}
          cz = @literal{uint8[] {120}}
          cq = quantize_linear(c, cs, cz)
          cd = dequantize_linear(cq, cs, cz)
          s = add(cd, rd)
)";
    else
        t += R"(
          s = add(c, rd)
)";
    t += R"(
          y0 = relu(s)
          ys = @literal{float32[] {0.25}}
          yz = @literal{uint8[] {0}}
          y = quantize_linear(y0, ys, yz)
          @return(y)
)";
    return t;
}

}  // namespace

TEST(fuse_qdq_text, quantize_int8_residual_add_fuses_into_the_convolution) {
    const auto text = residual_group(false);
    expect_rewrite(text, fuse, R"(
        module main
          x = @param -> uint8[1, 2, 3, 3]
          r = @param -> uint8[1, 3, 3, 3]
          w = @literal{int8[3, 2, 1, 1] {1, -2, 3, -4, 5, -6}}
          b = @literal{float32[3] {0.5, -1, 2}}
          y = quant_convolution{x_scale=0.5, x_zero_point=128, w_scales=[0.25, 0.5, 0.125], has_bias=true, out_type=5, y_scale=0.25, y_max=255, has_residual=true, r_scale=0.75, r_zero_point=3}(x, w, b, r)
          @return(y)
    )");
    // The integer product equals the float one here (small exact values): no level apart.
    passes_test::check_same_results(pass_text::parse(text), fuse, 0, 0);
}

TEST(fuse_qdq_text, imported_qdq_residual_keeps_its_rounding_as_quant_add) {
    auto m = pass_text::parse(residual_group(true));
    fuse(*m.get_main_module());
    const auto out = m.get_main_module()->to_string();
    EXPECT_NE(out.find("quant_add"), std::string::npos) << out;
    EXPECT_EQ(out.find("has_residual=true"), std::string::npos) << out;
    passes_test::check_same_results(pass_text::parse(residual_group(true)), fuse, 0, 0);
}
