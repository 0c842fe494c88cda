// QDQ groups on the cpu target (oneDNN's int8 kernels, op_quant.hpp) against ref, which
// runs the same fused integer ops (fuse_qdq is target-independent): equal within one
// output level (oneDNN rounds the requantize in float with a fused scale; ref computes
// acc * scale in double), and nothing left on the reference kernels. With
// KILN_CPU_INT8_KERNELS=all the int8 kernels are chosen on CPUs without VNNI too, where they
// compute in float inside (quant_real.hpp: what a program compiled on a VNNI CPU does when
// loaded on one without); the same bounds hold.
#include "cpu_test_util.hpp"
#include "env_override.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/global_avg_pool/global_avg_pool.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"

#include <kiln/module_text.hpp>
#include <kiln/serialize.hpp>

#include <algorithm>
#include <cfloat>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

both run_text(const std::string& src, const std::map<std::string, literal>& weights, const param_map& inputs,
              double atol) {
    builder b;
    b.p = parse_program(src, {literals_by_name(weights)});
    b.inputs = inputs;
    return run_both(b, 1e-4, atol);
}

// x (float) -> Q/DQ (uint8) -> conv (per-channel int8 weights, int32 bias) -> relu -> Q/DQ.
const char* conv_text = R"(
    module main
      x = @param -> float32[2, 8, 9, 7]
      xs = @literal{float32[] {0.03}}
      xz = @literal{uint8[] {120}}
      xq = quantize_linear(x, xs, xz)
      xd = dequantize_linear(xq, xs, xz)
      w = @literal{int8[16, GROUP_C, 3, 3] {...}}
      ws = @literal{float32[16] {...}}
      wz = @literal{int8[16] {...}}
      wd = dequantize_linear{axis=0}(w, ws, wz)
      b = @literal{float32[16] {...}}
      c = convolution{padding=[1, 1, 1, 1], stride=[STRIDE, STRIDE], group=GROUPS}(xd, wd, b)
      r = relu(c)
      ys = @literal{float32[] {0.05}}
      yz = @literal{uint8[] {3}}
      yq = quantize_linear(r, ys, yz)
      y = dequantize_linear(yq, ys, yz)
      @return(y)
)";

void check_conv(std::size_t groups, std::size_t stride, bool everywhere = false) {
    const std::size_t cg = 8 / groups;
    auto src = replaced(replaced(replaced(conv_text, "GROUP_C", std::to_string(cg)), "GROUPS", std::to_string(groups)),
                         "STRIDE", std::to_string(stride));
    std::vector<double> ws(16), bias(16);
    for (std::size_t c = 0; c < 16; ++c) ws[c] = 0.002 + 0.0005 * static_cast<double>(c), bias[c] = 0.1 * (c % 5) - 0.2;
    std::map<std::string, literal> weights{{"w", random_ints(type::int8, {16, cg, 3, 3}, -127, 127)},
                                           {"ws", literal(shape(type::float32, {16}), ws)},
                                           {"wz", literal(shape(type::int8, {16}), std::vector<double>(16, 0.0))},
                                           {"b", literal(shape(type::float32, {16}), bias)}};
    param_map in{{"x", random_literal({2, 8, 9, 7}, 3.0f).get_argument()}};
    auto r = run_text(src, weights, in, 0.05 + 1e-6);
    if (!cpu::has_int8_dot_product() && !everywhere) {  // back to float kernels there (dequantize_without_vnni.hpp)
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        return;
    }
    EXPECT_EQ(count_ops(r.cpu, "cpu::quant_conv"), 1u) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

}  // namespace

TEST(cpu_quant, convolution_u8_per_channel_relu_requantized) { check_conv(1, 1); }
TEST(cpu_quant, strided_grouped_and_depthwise_convolutions) {
    check_conv(2, 2);
    check_conv(8, 1);
}
TEST(cpu_quant, int8_convolution_kernels_without_vnni_compute_in_float) {
    test::env_override all("KILN_CPU_INT8_KERNELS", "all");
    check_conv(1, 1, true);
    check_conv(2, 2, true);
    check_conv(8, 1, true);
}

namespace {
void check_matmuls(bool everywhere, bool onednn = false) {
    // BERT's shape: int8 activations with zero points, a Q/DQ pair before each operand;
    // per-column weights plus a bias Add, and a product of two activations (QK^T).
    const char* src = R"(
        module main
          a = @param -> float32[2, 5, 12]
          k = @param -> float32[2, 12, 6]
          s = @literal{float32[] {0.02}}
          z = @literal{int8[] {-5}}
          aq = quantize_linear(a, s, z)
          ad = dequantize_linear(aq, s, z)
          w = @literal{int8[12, 6] {...}}
          ws = @literal{float32[6] {0.01, 0.02, 0.015, 0.005, 0.03, 0.01}}
          wz = @literal{int8[6] {0, 0, 0, 0, 0, 0}}
          wd = dequantize_linear(w, ws, wz)
          m = matmul(ad, wd)
          bias = @literal{float32[6] {0.5, -0.25, 1, 0, 2, -1}}
          y = add(m, bias)
          ks = @literal{float32[] {0.025}}
          kz = @literal{int8[] {7}}
          kq = quantize_linear(k, ks, kz)
          kd = dequantize_linear(kq, ks, kz)
          a2 = dequantize_linear(aq, s, z)
          qk = matmul(a2, kd)
          @return(y, qk)
    )";
    std::map<std::string, literal> weights{{"w", random_ints(type::int8, {12, 6}, -127, 127)}};
    param_map in{{"a", random_literal({2, 5, 12}, 2.0f).get_argument()},
                 {"k", random_literal({2, 12, 6}, 2.0f).get_argument()}};
    auto r = run_text(src, weights, in, 1e-4);
    if (!cpu::has_int8_dot_product() && !everywhere) {  // back to float kernels (dequantize_without_vnni.hpp)
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        return;
    }
    // With AVX-512 VNNI the constant weights' product is Kiln's VNNI GEMM's (int8_gemm.hpp)
    // unless KILN_CPU_INT8_KERNELS says oneDNN.
    const bool own = cpu::has_avx512_vnni() && !everywhere && !onednn;
    EXPECT_EQ(count_ops(r.cpu, "cpu::quant_matmul"), own ? 1u : 2u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::int8_gemm"), own ? 1u : 0u) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}
}  // namespace

TEST(cpu_quant, matmuls_s8_weights_and_activation_pairs_with_float_results) { check_matmuls(false); }
TEST(cpu_quant, matmuls_on_onednn_when_asked) {
    test::env_override onednn("KILN_CPU_INT8_KERNELS", "onednn");
    check_matmuls(false, true);
}
TEST(cpu_quant, int8_matmul_kernels_without_vnni_compute_in_float) {
    test::env_override all("KILN_CPU_INT8_KERNELS", "all");
    check_matmuls(true);
}

TEST(cpu_quant, residual_add_of_two_quantized_tensors_is_exact) {
    // MobileNet's inverted residual: Add(DQ(a), DQ(b)) -> Q computed as the ONNX ops do.
    const char* src = R"(
        module main
          a = @param -> float32[1, 24, 7, 5]
          b = @param -> float32[1, 24, 7, 5]
          sa = @literal{float32[] {0.04}}
          za = @literal{uint8[] {100}}
          sb = @literal{float32[] {0.03}}
          zb = @literal{uint8[] {130}}
          aq = quantize_linear(a, sa, za)
          bq = quantize_linear(b, sb, zb)
          ad = dequantize_linear(aq, sa, za)
          bd = dequantize_linear(bq, sb, zb)
          s = add(ad, bd)
          sy = @literal{float32[] {0.05}}
          zy = @literal{uint8[] {120}}
          y = quantize_linear(s, sy, zy)
          @return(y)
    )";
    param_map in{{"a", random_literal({1, 24, 7, 5}, 4.0f).get_argument()},
                 {"b", random_literal({1, 24, 7, 5}, 4.0f).get_argument()}};
    auto r = run_text(src, {}, in, 0.0);  // Q, DQ and quant_add in the ONNX float32 steps: exact
    EXPECT_EQ(count_ops(r.cpu, "cpu::quant_add"), 1u) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

namespace {
// quantize_int8's residual form (a ResNet block's end): the convolution's float result goes
// into Add(conv, DQ(r)) -> Relu -> Q with no Q/DQ of its own. fuse_qdq makes conv + add +
// relu + Q one quant_convolution with r as its residual, which the cpu target runs as
// oneDNN's in-place sum post-op (r's buffer becomes the result). r is another int8
// convolution's result (channels-last, its own buffer), computed exactly on both targets
// (identity weights of 64, power-of-two scales: relu(x - 120)), so that the two runs
// differ by the fused kernel's rounding alone. `read_later`: r is also read after the add
// (rd2, an output), so its buffer may not be written (the kernel writes into a copy).
const char* residual_text = R"(
    module main
      x = @param -> float32[2, 32, 9, 7]
      xs = @literal{float32[] {0.03125}}
      xz = @literal{uint8[] {120}}
      xq = quantize_linear(x, xs, xz)
      xd = dequantize_linear(xq, xs, xz)
      w0 = @literal{int8[32, 32, 1, 1] {...}}
      ws0 = @literal{float32[32] {...}}
      wz = @literal{int8[32] {...}}
      wd0 = dequantize_linear{axis=0}(w0, ws0, wz)
      c0 = convolution(xd, wd0)
      r0 = relu(c0)
      rs = @literal{float32[] {0.03125}}
      rz = @literal{uint8[] {0}}
      rq = quantize_linear(r0, rs, rz)
      rd = dequantize_linear(rq, rs, rz)
      w1 = @literal{int8[32, 32, 3, 3] {...}}
      ws = @literal{float32[32] {...}}
      wd1 = dequantize_linear{axis=0}(w1, ws, wz)
      b = @literal{float32[32] {...}}
      c1 = convolution{padding=[1, 1, 1, 1]}(xd, wd1, b)
      s = add(c1, rd)
      y0 = relu(s)
      ys = @literal{float32[] {0.05}}
      yz = @literal{uint8[] {0}}
      yq = quantize_linear(y0, ys, yz)
      y = dequantize_linear(yq, ys, yz)
      rs2 = @literal{float32[] {0.02}}
      rd2 = dequantize_linear(rq, rs2, rz)
      @return(RETURNS)
)";

// `zero_points`: r and the result get non-zero zero points (oneDNN's sum zero point and its
// destination zero point; the Relu then narrows the saturation range to start there).
void check_residual(bool read_later, bool everywhere = false, bool zero_points = false) {
    auto src = replaced(residual_text, "RETURNS", read_later ? "y, rd2" : "y");
    if (zero_points) {
        src = replaced(src, "rz = @literal{uint8[] {0}}", "rz = @literal{uint8[] {3}}");
        src = replaced(src, "yz = @literal{uint8[] {0}}", "yz = @literal{uint8[] {7}}");
    }
    std::vector<double> ws(32), bias(32), identity(32 * 32, 0.0);
    for (std::size_t c = 0; c < 32; ++c) ws[c] = 0.0002 + 0.00005 * static_cast<double>(c), bias[c] = 0.1 * (c % 5) - 0.2;
    for (std::size_t c = 0; c < 32; ++c) identity[c * 32 + c] = 64;
    std::map<std::string, literal> weights{{"w0", literal(shape(type::int8, {32, 32, 1, 1}), identity)},
                                           {"ws0", literal(shape(type::float32, {32}), std::vector<double>(32, 1.0 / 64))},
                                           {"w1", random_ints(type::int8, {32, 32, 3, 3}, -127, 127)},
                                           {"ws", literal(shape(type::float32, {32}), ws)},
                                           {"wz", literal(shape(type::int8, {32}), std::vector<double>(32, 0.0))},
                                           {"b", literal(shape(type::float32, {32}), bias)}};
    param_map in{{"x", random_literal({2, 32, 9, 7}, 3.0f).get_argument()}};
    // One output level (0.05): oneDNN requantizes with a fused scale in float.
    auto r = run_text(src, weights, in, 0.05 + 1e-6);
    // Neither the residual nor the result is mostly clipped to 0 (the test would show nothing).
    for (const auto& out : r.ref_out) {
        std::size_t nonzero = 0;
        for (float v : out.to_vector<float>()) nonzero += v != 0.0f;
        EXPECT_GT(nonzero, out.get_shape().elements() / 4);
    }
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::quant_add"), 0u) << text(r.cpu);
    if (!cpu::has_int8_dot_product() && !everywhere) return;  // float kernels (dequantize_without_vnni.hpp)
    EXPECT_EQ(count_ops(r.cpu, "cpu::quant_conv"), 2u) << text(r.cpu);
    const instruction* fused = nullptr;
    for (const auto& ins : *r.cpu.get_main_module())
        if (const auto* q = ins.get_operator().any_cast<cpu::quant_conv>(); q && q->op.has_residual) {
            fused = &ins;
            EXPECT_EQ(q->kernel_info().find("ref"), std::string::npos) << q->kernel_info();
        }
    ASSERT_NE(fused, nullptr) << text(r.cpu);
    // In place (its output buffer is r, the other convolution's result) unless r is read later.
    const auto buf = fused->inputs().back();
    EXPECT_EQ(buf->name(), read_later ? "cpu::quant_reorder" : "cpu::quant_conv") << text(r.cpu);
}

}  // namespace

TEST(cpu_quant, residual_convolution_sums_in_place) { check_residual(false); }
TEST(cpu_quant, residual_convolution_with_zero_points) {
    check_residual(false, false, true);
    check_residual(true, false, true);
}
TEST(cpu_quant, residual_convolution_copies_a_residual_read_later) { check_residual(true); }
TEST(cpu_quant, residual_convolution_without_vnni_computes_in_float) {
    test::env_override all("KILN_CPU_INT8_KERNELS", "all");
    check_residual(false, true);
    check_residual(true, true);
    check_residual(false, true, true);
}

namespace {

// x -> Q/DQ -> conv (float result) -> CLAMP -> add: the clamp (a Relu or Clip that is the
// float result's only reader) goes into the kernel as a post-op. The convolution's values
// reach past both bounds, so a dropped or wrong clamp shows.
const char* float_clamp_text = R"(
    module main
      x = @param -> float32[1, 8, 9, 7]
      xs = @literal{float32[] {0.03}}
      xz = @literal{uint8[] {120}}
      xq = quantize_linear(x, xs, xz)
      xd = dequantize_linear(xq, xs, xz)
      w = @literal{int8[16, 8, 3, 3] {...}}
      ws = @literal{float32[16] {...}}
      wz = @literal{int8[16] {...}}
      wd = dequantize_linear{axis=0}(w, ws, wz)
      b = @literal{float32[16] {...}}
      c = convolution{padding=[1, 1, 1, 1]}(xd, wd, b)
      lo = @literal{float32[] {-1.5}}
      hi = @literal{float32[] {2.5}}
      CLAMP
      TAIL
      @return(RETURNS)
)";

builder float_clamp_case(const std::string& clamp, const std::string& returns, const std::string& tail = "y = add(r, r)") {
    builder b;
    auto src = replaced(replaced(replaced(float_clamp_text, "CLAMP", clamp), "RETURNS", returns), "TAIL", tail);
    std::vector<double> ws(16), bias(16);
    for (std::size_t c = 0; c < 16; ++c) ws[c] = 0.004 + 0.001 * static_cast<double>(c), bias[c] = 0.3 * (c % 5) - 0.6;
    std::map<std::string, literal> weights{{"w", random_ints(type::int8, {16, 8, 3, 3}, -127, 127)},
                                           {"ws", literal(shape(type::float32, {16}), ws)},
                                           {"wz", literal(shape(type::int8, {16}), std::vector<double>(16, 0.0))},
                                           {"b", literal(shape(type::float32, {16}), bias)}};
    b.p = parse_program(src, {literals_by_name(weights)});
    b.inputs = {{"x", random_literal({1, 8, 9, 7}, 3.0f).get_argument()}};
    return b;
}

const cpu::quant_conv* the_quant_conv(const program& p) {
    const auto* ins = first_of<cpu::quant_conv>(p);
    return ins ? ins->get_operator().any_cast<cpu::quant_conv>() : nullptr;
}

}  // namespace

// Without VNNI (the cpu-as-AVX2 run of these tests) KILN_CPU_INT8_KERNELS=all keeps the int8
// kernels, computing in float inside (quant_real.hpp), where the clamp is a post-op too.
TEST(cpu_quant, a_clip_or_relu_after_a_float_result_runs_in_the_kernel) {
    test::env_override all("KILN_CPU_INT8_KERNELS", cpu::has_int8_dot_product() ? nullptr : "all");
    for (const auto& [clamp, want] : std::vector<std::pair<std::string, std::vector<float>>>{
             {"r = clip(c, lo, hi)", {-1.5f, 2.5f}}, {"r = relu(c)", {0.0f, FLT_MAX}}}) {
        const auto b = float_clamp_case(clamp, "y");
        auto r = run_both(b, 1e-4, 1e-4);
        // The convolution's values reach past the bounds (the clamp changes the result).
        auto c = float_clamp_case("r = relu(c)", "c").p;
        c.compile(*get_target("ref"));
        const auto raw = c.eval(b.inputs)[0].to_vector<float>();
        EXPECT_LT(*std::min_element(raw.begin(), raw.end()), -2.0f);
        EXPECT_GT(*std::max_element(raw.begin(), raw.end()), 3.0f);
        const auto* q = the_quant_conv(r.cpu);
        ASSERT_NE(q, nullptr) << text(r.cpu);
        EXPECT_EQ(q->float_clamp, want) << clamp << "\n" << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        // Saved and loaded: the clamp is an attribute of the kernel.
        const auto bytes = save_buffer(r.cpu);
        auto loaded = load_buffer(bytes.data(), bytes.size());
        ASSERT_NE(the_quant_conv(loaded), nullptr);
        EXPECT_EQ(the_quant_conv(loaded)->float_clamp, want);
        expect_close(loaded.eval(b.inputs)[0], r.ref_out[0], 1e-4, 1e-4);
    }
}

TEST(cpu_quant, a_clamp_that_is_a_result_or_reads_a_result_stays_apart) {
    test::env_override all("KILN_CPU_INT8_KERNELS", cpu::has_int8_dot_product() ? nullptr : "all");
    for (const char* returns : {"y, r", "y, c"}) {
        auto r = run_both(float_clamp_case("r = clip(c, lo, hi)", returns), 1e-4, 1e-4);
        const auto* q = the_quant_conv(r.cpu);
        ASSERT_NE(q, nullptr) << text(r.cpu);
        EXPECT_TRUE(q->float_clamp.empty()) << returns << "\n" << text(r.cpu);
    }
}

// The classifier's pooling after the last convolution of an int8 network (its float result
// channels-last in the IR strides, as --int8 leaves MobileNetV2's): Kiln's global average
// pooling reads it where it is, its [N, C, 1, 1] result row-major.
TEST(cpu_quant, a_global_average_pool_reads_a_float_result_in_place) {
    test::env_override all("KILN_CPU_INT8_KERNELS", cpu::has_int8_dot_product() ? nullptr : "all");
    auto r = run_both(float_clamp_case("r = relu(c)", "y", "y = pooling{mode=0, global=true}(r)"), 1e-4, 1e-5);
    const instruction* pool = first_of<cpu::global_avg_pool>(r.cpu);
    ASSERT_NE(pool, nullptr) << text(r.cpu);
    EXPECT_TRUE(runs<cpu::quant_conv>(&*pool->inputs()[0])) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

// A QDQ model's classifier pooling: DequantizeLinear -> GlobalAveragePool. The pooling reads
// the convolution's levels and dequantizes their mean (no float copy of the activation).
TEST(cpu_quant, a_global_average_pool_reads_the_levels_a_dequantize_would_expand) {
    test::env_override all("KILN_CPU_INT8_KERNELS", cpu::has_int8_dot_product() ? nullptr : "all");
    for (const char* zero : {"3", "0"}) {
        const std::string tail = std::string("ys = @literal{float32[] {0.05}}\n      yz = @literal{uint8[] {") + zero +
                                 "}}\n      rq = quantize_linear(r, ys, yz)\n      rd = dequantize_linear(rq, ys, yz)\n"
                                 "      y = pooling{mode=0, global=true}(rd)";
        // Within one output level (0.05) of ref, as every QDQ convolution here.
        const auto b = float_clamp_case("r = relu(c)", "y", tail);
        auto r = run_both(b, 1e-4, 0.05 + 1e-6);
        const instruction* pool = first_of<cpu::global_avg_pool>(r.cpu);
        ASSERT_NE(pool, nullptr) << text(r.cpu);
        EXPECT_TRUE(runs<cpu::quant_conv>(&*pool->inputs()[0])) << text(r.cpu);
        EXPECT_EQ(pool->get_operator().any_cast<cpu::global_avg_pool>()->x_type, type::uint8);
        EXPECT_EQ(count_ops(r.cpu, "cpu::quant_linear"), 1u) << text(r.cpu);  // x's quantize only
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        const auto bytes = save_buffer(r.cpu);
        auto loaded = load_buffer(bytes.data(), bytes.size());
        expect_close(loaded.eval(b.inputs)[0], r.cpu_out[0], 0.0, 0.0);
    }
}
