// An image input quantized straight into channels-last (quant_linear_kernel::channels_last):
// the kernel equals the ONNX float32 steps (x / scale, round half to even, zero point,
// saturate) value for value, interleaved, for 1-4 channels, u8 and s8, pixel counts that
// leave every vector tail; a QDQ convolution over such an input matches ref with no
// reorder between them; a saved program loads and
// runs; KILN_CPU_INPUT_REORDER=dnnl keeps the two passes; what
// the kernel cannot take it refuses by name.
#include "cpu_test_util.hpp"
#include "env_override.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"
#include "targets/cpu/kernels/quant_loops/quant_loops.hpp"

#include <kiln/errors.hpp>
#include <kiln/module_text.hpp>
#include <kiln/serialize.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

// ONNX QuantizeLinear in float32 steps (what ref computes).
template <class Q>
int onnx_quantize(float x, float scale, int zp) {
    const float lo = std::is_signed_v<Q> ? -128.0f : 0.0f, hi = std::is_signed_v<Q> ? 127.0f : 255.0f;
    const float q = std::nearbyint(x / scale) + static_cast<float>(zp);
    return static_cast<int>(std::min(std::max(q, lo), hi));
}

template <class Q>
void check_kernel(context& ctx, std::mt19937& rng, std::vector<std::size_t> lens, float scale, int zp) {
    const shape xs(type::float32, lens);
    std::vector<float> x(xs.elements());
    std::uniform_real_distribution<float> v(-3.0f, 3.0f);
    for (auto& e : x) e = v(rng);
    // Values on exact half levels (round half to even) and beyond saturation too.
    for (std::size_t i = 0; i < x.size(); i += 7) x[i] = (std::floor(x[i] / scale) + 0.5f) * scale;
    for (std::size_t i = 3; i < x.size(); i += 11) x[i] = (i % 2 ? 1000.0f : -1000.0f);
    const type qt = std::is_signed_v<Q> ? type::int8 : type::uint8;
    const shape ys(qt, lens, cpu::channels_last_strides(lens));
    std::vector<Q> y(ys.element_space(), Q(0x5a));
    cpu::quant_linear_kernel k;
    k.scale = scale;
    k.zero_point = zp;
    k.out_type = qt;
    k.channels_last = true;
    ASSERT_EQ(k.compute_shape({xs, ys}), ys);
    k.compute(ctx, ys, {argument::borrow(xs, x.data()), argument::borrow(ys, y.data())});
    const std::size_t n = lens[0], c = lens[1], hw = lens[2] * lens[3];
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t ch = 0; ch < c; ++ch)
            for (std::size_t p = 0; p < hw; ++p) {
                const float xv = x[(i * c + ch) * hw + p];
                ASSERT_EQ(int(y[(i * hw + p) * c + ch]), onnx_quantize<Q>(xv, scale, zp))
                    << "dims " << xs.to_string() << " image " << i << " channel " << ch << " pixel " << p << " x " << xv;
            }
}

// x (float, C channels) -> Q/DQ (uint8) -> conv 3x3 stride 2 (per-channel int8 weights) -> Q/DQ.
const char* stem_text = R"(
    module main
      x = @param -> float32[N, C, 37, 45]
      xs = @literal{float32[] {0.025}}
      xz = @literal{uint8[] {118}}
      xq = quantize_linear(x, xs, xz)
      xd = dequantize_linear(xq, xs, xz)
      w = @literal{int8[16, C, 3, 3] {...}}
      ws = @literal{float32[16] {...}}
      wz = @literal{int8[16] {...}}
      wd = dequantize_linear{axis=0}(w, ws, wz)
      b = @literal{float32[16] {...}}
      c = convolution{padding=[1, 1, 1, 1], stride=[2, 2]}(xd, wd, b)
      r = relu(c)
      ys = @literal{float32[] {0.05}}
      yz = @literal{uint8[] {3}}
      yq = quantize_linear(r, ys, yz)
      y = dequantize_linear(yq, ys, yz)
      @return(y)
)";

builder stem(std::size_t n, std::size_t c) {
    builder b;
    const auto src = replaced(replaced(stem_text, "N,", std::to_string(n) + ","), "C,", std::to_string(c) + ",");
    std::vector<double> ws(16), bias(16);
    for (std::size_t o = 0; o < 16; ++o) ws[o] = 0.002 + 0.0005 * static_cast<double>(o), bias[o] = 0.1 * (o % 5) - 0.2;
    std::map<std::string, literal> weights{{"w", random_ints(type::int8, {16, c, 3, 3}, -127, 127)},
                                           {"ws", literal(shape(type::float32, {16}), ws)},
                                           {"wz", literal(shape(type::int8, {16}), std::vector<double>(16, 0.0))},
                                           {"b", literal(shape(type::float32, {16}), bias)}};
    b.p = parse_program(src, {literals_by_name(weights)});
    b.inputs = {{"x", random_literal({n, c, 37, 45}, 3.0f).get_argument()}};
    return b;
}

// One output level (0.05): oneDNN requantizes with a fused scale in float.
both run_stem(std::size_t n, std::size_t c) { return run_both(stem(n, c), 1e-4, 0.05 + 1e-6); }

const cpu::quant_linear_kernel* input_quantize(const program& p) {
    for (const auto& ins : *p.get_main_module())
        if (const auto* k = ins.get_operator().any_cast<cpu::quant_linear_kernel>();
            k && !k->dequantize && ins.get_shape().ndim() == 4)
            return k;
    return nullptr;
}

// What the quantized convolution reads as its activation (nullptr without one).
const instruction* stem_input(const program& p) {
    const auto* conv = first_of<cpu::quant_conv>(p);
    return conv ? &*conv->inputs()[0] : nullptr;
}

}  // namespace

TEST(cpu_quantize_channels_last, equals_the_onnx_steps_interleaved) {
    builder any;
    any.ret({any.op("relu", {any.param("x", {1, 2, 3, 3})})});
    program p = any.p;
    p.compile(*get_target("cpu"));
    auto& ctx = p.get_context();
    std::mt19937 rng(7);
    for (std::size_t c : {1u, 2u, 3u, 4u})
        for (const auto& hw : std::vector<std::pair<std::size_t, std::size_t>>{{1, 1}, {3, 5}, {7, 9}, {64, 67}}) {
            check_kernel<std::uint8_t>(ctx, rng, {2, c, hw.first, hw.second}, 0.02f, 128);
            check_kernel<std::int8_t>(ctx, rng, {1, c, hw.first, hw.second}, 0.03f, -5);
        }
    // Tasks of 4096 pixels: an image split across threads, two images.
    check_kernel<std::uint8_t>(ctx, rng, {2, 3, 97, 101}, 0.025f, 118);
}

TEST(cpu_quantize_channels_last, refuses_what_it_cannot_take) {
    cpu::quant_linear_kernel k;
    k.channels_last = true;
    const std::vector<std::size_t> five{1, 5, 4, 4}, three{1, 3, 4, 4};
    // Five channels; an NCHW result; a dequantize.
    EXPECT_THROW(k.compute_shape({shape(type::float32, five), shape(type::uint8, five, cpu::channels_last_strides(five))}),
                 error);
    EXPECT_THROW(k.compute_shape({shape(type::float32, three), shape(type::uint8, three)}), error);
    k.dequantize = true;
    EXPECT_THROW(k.compute_shape({shape(type::float32, three), shape(type::uint8, three, cpu::channels_last_strides(three))}),
                 error);
}

TEST(cpu_quantize_channels_last, a_quantized_stem_reads_its_input_without_a_reorder) {
    for (std::size_t c : {1u, 3u, 4u})
        for (std::size_t n : {1u, 2u}) {
            auto r = run_stem(n, c);
            EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
            if (!cpu::has_int8_dot_product()) continue;  // float kernels there (dequantize_without_vnni.hpp)
            const auto* k = input_quantize(r.cpu);
            ASSERT_NE(k, nullptr) << text(r.cpu);
            EXPECT_TRUE(k->channels_last) << text(r.cpu);
            EXPECT_TRUE(runs<cpu::quant_linear_kernel>(stem_input(r.cpu))) << text(r.cpu);
        }
}

TEST(cpu_quantize_channels_last, saved_program_loads_and_runs) {
    if (!cpu::has_int8_dot_product()) GTEST_SKIP() << "no VNNI: the stem runs on float kernels";
    const auto b = stem(2, 3);
    auto r = run_both(b, 1e-4, 0.05 + 1e-6);
    const auto bytes = save_buffer(r.cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    const auto* k = input_quantize(loaded);
    ASSERT_NE(k, nullptr) << text(loaded);
    EXPECT_TRUE(k->channels_last);
    auto got = loaded.eval(b.inputs);
    ASSERT_EQ(got.size(), r.cpu_out.size());
    for (std::size_t i = 0; i < got.size(); ++i) expect_close(got[i], r.cpu_out[i], 0.0, 0.0);
}

TEST(cpu_quantize_channels_last, input_reorder_dnnl_keeps_the_two_passes) {
    if (!cpu::has_int8_dot_product()) GTEST_SKIP() << "no VNNI: the stem runs on float kernels";
    test::env_override o("KILN_CPU_INPUT_REORDER", "dnnl");
    auto r = run_stem(1, 3);
    const auto* k = input_quantize(r.cpu);
    ASSERT_NE(k, nullptr) << text(r.cpu);
    EXPECT_FALSE(k->channels_last);
    EXPECT_TRUE(runs<cpu::quant_reorder>(stem_input(r.cpu))) << text(r.cpu);
}
