// Kiln's own exact int8 kernels (int8_gemm.hpp, int8_depthwise.hpp) against the ref target's
// quant_convolution / quant_dot: bit-equal results (8-bit levels and float32 values), over
// odd shapes (channels not a multiple of 8 or 16, K odd, pixels not a multiple of the
// 6-row tile), u8 and s8 activations with non-zero zero points, int32 and float32 biases,
// Relu/Clip ranges folded into the saturation, float32 results, and accumulators large
// enough for the double path. Each case runs the AVX2 kernels (where the CPU has them) and
// the portable ones (KILN_CPU_PACKED_GEMM_ISA=generic); with AVX-512 VNNI also the VNNI
// GEMM on every product it can take (KILN_CPU_INT8_KERNELS=own), whose weights are bytes, 4
// k's per lane, and whose s8 activations are shifted by 128.
#include "cpu_test_util.hpp"
#include "env_override.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/int8_gemm/int8_gemm.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"

#include "ops/quant_fused.hpp"

#include <kiln/serialize.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

struct qcase {
    type x_type = type::uint8;
    std::int64_t x_zero = 117;
    type out_type = type::uint8;
    int bias = 1;               // 0 none, 1 int32, 2 float32
    std::int64_t y_min = 0, y_max = 255, y_zero = 3;
    int w_lo = -127, w_hi = 127;
    bool per_channel = true;
    float x_scale = 0.0173f, w_scale = 0.0021f, y_scale = 0.0913f;  // w_scale: channel 0's
};

void set_params(op::requantize_params& p, const qcase& c, std::size_t channels) {
    p.x_scale = c.x_scale;
    p.x_zero_point = c.x_zero;
    p.w_scales.clear();
    for (std::size_t i = 0; i < (c.per_channel ? channels : 1); ++i)
        p.w_scales.push_back(c.w_scale + 0.00037f * static_cast<float>(i % 11));
    p.w_zero_point = 0;
    p.has_bias = c.bias != 0;
    p.out_type = c.out_type;
    p.y_scale = c.out_type == type::float32 ? 1.0f : c.y_scale;
    p.y_zero_point = c.out_type == type::float32 ? 0 : c.y_zero;
    p.y_min = c.y_min;
    p.y_max = c.y_max;
}

instruction_ref bias_literal(builder& b, const qcase& c, std::size_t channels) {
    if (c.bias == 1) return b.m->add_literal(random_ints(type::int32, {channels}, -20000, 20000));
    return b.m->add_literal(random_literal({channels}, 3.0f));
}

// ref and cpu on one program; every output bit-equal; `kernel` taken `count` times.
// Where oneDNN has VNNI its int8 kernels take what the own VNNI GEMM does not, and they are
// not bit-equal to ref (its requantize differs by a level now and then): not checked here.
void run_exact(builder& b, const std::string& kernel, std::size_t count) {
    for (bool generic : {false, true}) {
        if (cpu::has_int8_dot_product()) break;
        test::env_override isa("KILN_CPU_PACKED_GEMM_ISA", generic ? "generic" : "");
        auto r = run_both(b, 0.0, 0.0);
        EXPECT_EQ(count_ops(r.cpu, kernel), count) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    }
    if (kernel != "cpu::int8_gemm" || !cpu::has_avx512_vnni()) return;  // vnni_kernel_available says
    test::env_override own("KILN_CPU_INT8_KERNELS", "own");
    auto r = run_both(b, 0.0, 0.0);
    EXPECT_EQ(count_ops(r.cpu, kernel), count) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

void check_pointwise(std::size_t n, std::size_t cin, std::size_t cout, std::size_t h, std::size_t w, const qcase& c) {
    SCOPED_TRACE("1x1 " + std::to_string(n) + "x" + std::to_string(cin) + "x" + std::to_string(h) + "x" +
                 std::to_string(w) + " -> " + std::to_string(cout));
    builder b;
    const auto lo = c.x_type == type::int8 ? -128 : 0, hi = c.x_type == type::int8 ? 127 : 255;
    auto xl = random_ints(c.x_type, {n, cin, h, w}, lo, hi);
    b.inputs["x"] = xl.get_argument();
    auto x = b.m->add_parameter("x", xl.get_shape());
    auto wt = b.m->add_literal(random_ints(type::int8, {cout, cin, 1, 1}, c.w_lo, c.w_hi));
    op::quant_convolution q;
    q.padding = {0, 0, 0, 0};
    q.stride = {1, 1};
    q.dilation = {1, 1};
    set_params(q, c, cout);
    std::vector<instruction_ref> args{x, wt};
    if (c.bias) args.push_back(bias_literal(b, c, cout));
    auto y = b.m->add_instruction(q, args);
    // A second layer reads the channels-last result (the first is no program result).
    if (c.out_type != type::float32) {
        auto w2 = b.m->add_literal(random_ints(type::int8, {7, cout, 1, 1}, -127, 127));
        op::quant_convolution q2 = q;
        qcase c2;
        c2.x_type = c.out_type;
        c2.x_zero = c.y_zero;
        c2.bias = 0;
        set_params(q2, c2, 7);
        b.ret({y, b.m->add_instruction(q2, {y, w2})});
        run_exact(b, "cpu::int8_gemm", 2);
    } else {
        b.ret({y});
        run_exact(b, "cpu::int8_gemm", 1);
    }
}

void check_dot(std::vector<std::size_t> a_lens, std::size_t nc, const qcase& c) {
    SCOPED_TRACE("dot k " + std::to_string(a_lens.back()) + " n " + std::to_string(nc));
    builder b;
    const auto lo = c.x_type == type::int8 ? -128 : 0, hi = c.x_type == type::int8 ? 127 : 255;
    auto al = random_ints(c.x_type, a_lens, lo, hi);
    b.inputs["a"] = al.get_argument();
    auto a = b.m->add_parameter("a", al.get_shape());
    auto wt = b.m->add_literal(random_ints(type::int8, {a_lens.back(), nc}, c.w_lo, c.w_hi));
    op::quant_dot q;
    set_params(q, c, nc);
    std::vector<instruction_ref> args{a, wt};
    if (c.bias) args.push_back(bias_literal(b, c, nc));
    b.ret({b.m->add_instruction(q, args)});
    run_exact(b, "cpu::int8_gemm", 1);
}

void check_depthwise(std::size_t n, std::size_t ch, std::size_t h, std::size_t w, std::int64_t stride, std::int64_t pad,
                     const qcase& c) {
    SCOPED_TRACE("dw " + std::to_string(ch) + "x" + std::to_string(h) + "x" + std::to_string(w) + " stride " +
                 std::to_string(stride) + " pad " + std::to_string(pad));
    builder b;
    const auto lo = c.x_type == type::int8 ? -128 : 0, hi = c.x_type == type::int8 ? 127 : 255;
    auto xl = random_ints(c.x_type, {n, ch, h, w}, lo, hi);
    b.inputs["x"] = xl.get_argument();
    auto x = b.m->add_parameter("x", xl.get_shape());
    auto wt = b.m->add_literal(random_ints(type::int8, {ch, 1, 3, 3}, c.w_lo, c.w_hi));
    op::quant_convolution q;
    q.padding = {pad, pad, pad, pad};
    q.stride = {stride, stride};
    q.dilation = {1, 1};
    q.group = static_cast<std::int64_t>(ch);
    set_params(q, c, ch);
    std::vector<instruction_ref> args{x, wt};
    if (c.bias) args.push_back(bias_literal(b, c, ch));
    b.ret({b.m->add_instruction(q, args)});
    run_exact(b, "cpu::int8_depthwise", 1);
}

// A group-1 convolution with few inputs per window (MobileNetV2's first layer): int8_im2col
// rows into the GEMM.
void check_windows(std::size_t n, std::size_t cin, std::size_t cout, std::size_t h, std::size_t w, std::int64_t k,
                   std::int64_t stride, std::int64_t pad, const qcase& c) {
    SCOPED_TRACE("windows " + std::to_string(cin) + "x" + std::to_string(h) + "x" + std::to_string(w) + " k " +
                 std::to_string(k) + " stride " + std::to_string(stride) + " pad " + std::to_string(pad));
    builder b;
    const auto lo = c.x_type == type::int8 ? -128 : 0, hi = c.x_type == type::int8 ? 127 : 255;
    auto xl = random_ints(c.x_type, {n, cin, h, w}, lo, hi);
    b.inputs["x"] = xl.get_argument();
    auto x = b.m->add_parameter("x", xl.get_shape());
    const auto ku = static_cast<std::size_t>(k);
    auto wt = b.m->add_literal(random_ints(type::int8, {cout, cin, ku, ku}, c.w_lo, c.w_hi));
    op::quant_convolution q;
    q.padding = {pad, pad, pad, pad};
    q.stride = {stride, stride};
    q.dilation = {1, 1};
    set_params(q, c, cout);
    std::vector<instruction_ref> args{x, wt};
    if (c.bias) args.push_back(bias_literal(b, c, cout));
    b.ret({b.m->add_instruction(q, args)});
    run_exact(b, "cpu::int8_gemm", 1);
}

qcase u8_relu() { return {}; }
qcase s8_clip() {
    qcase c;
    c.x_type = type::int8;
    c.x_zero = -9;
    c.out_type = type::int8;
    c.y_zero = -4;
    c.y_min = -4;    // Relu folded: the zero point
    c.y_max = 60;    // Clip's upper bound
    c.bias = 2;
    return c;
}
qcase f32_out() {
    qcase c;
    c.out_type = type::float32;
    c.y_min = c.y_max = 0;
    c.x_zero = 201;
    return c;
}
qcase f32_out_float_bias() {
    qcase c = f32_out();
    c.bias = 2;
    c.x_type = type::int8;
    c.x_zero = 5;
    return c;
}
qcase u8_full_range_no_bias() {
    qcase c;
    c.bias = 0;
    c.y_min = 0;
    c.y_max = 255;
    c.y_zero = 128;
    c.w_lo = -128;  // -128 too: vpmaddwd does not saturate
    c.per_channel = false;
    return c;
}

}  // namespace

TEST(cpu_int8_gemm, pointwise_convolutions_bit_equal_to_ref) {
    for (const auto& c : {u8_relu(), s8_clip(), f32_out(), f32_out_float_bias(), u8_full_range_no_bias()}) {
        check_pointwise(1, 17, 37, 5, 7, c);   // K odd, Cout not a multiple of 8, 35 pixels
        check_pointwise(2, 32, 16, 3, 3, c);   // one whole panel
        check_pointwise(1, 3, 5, 1, 1, c);     // one pixel
    }
    check_pointwise(1, 96, 24, 14, 13, u8_relu());  // many tiles and row blocks
    check_pointwise(1, 160, 960, 4, 5, s8_clip());
}

TEST(cpu_int8_gemm, small_window_convolutions_bit_equal_to_ref) {
    for (const auto& c : {u8_relu(), s8_clip(), f32_out(), u8_full_range_no_bias()}) {
        check_windows(1, 3, 32, 15, 14, 3, 2, 1, c);  // MobileNetV2's first layer, smaller
        check_windows(2, 2, 5, 6, 7, 3, 1, 0, c);     // batch 2, no padding, odd channel counts
        check_windows(1, 1, 17, 5, 5, 5, 1, 2, c);    // 5x5, padding 2
        check_windows(1, 16, 8, 9, 9, 1, 2, 0, c);    // 1x1 stride 2 (not a plain GEMM of pixels)
    }
}

TEST(cpu_int8_gemm, large_accumulators_take_the_double_path_exactly) {
    // 255 * 127 * 700 > 2^24: float(acc) would not be exact.
    qcase c = u8_full_range_no_bias();
    c.w_lo = 100;
    c.w_hi = 127;
    c.x_zero = 0;
    c.out_type = type::float32;
    c.y_min = c.y_max = 0;
    check_pointwise(1, 701, 19, 2, 5, c);
    c.bias = 1;
    c.out_type = type::uint8;
    c.y_max = 255;
    check_dot({7, 701}, 19, c);
}

TEST(cpu_int8_gemm, halves_round_to_even_as_ref) {
    // acc * 0.5 / 1: every odd accumulator is a tie (the vector kernels' check sends those
    // lanes through ref's division); and 0.5 / 0.1, whose reciprocal is inexact.
    for (float y : {1.0f, 0.1f, 3.0f}) {
        qcase c = u8_full_range_no_bias();
        c.x_scale = 1.0f;
        c.w_scale = 0.5f;
        c.y_scale = y;
        c.x_zero = 100;
        c.y_zero = 120;
        c.w_lo = -3;
        c.w_hi = 3;
        check_dot({9, 31}, 21, c);
        check_depthwise(1, 21, 5, 6, 1, 1, c);
    }
}

TEST(cpu_int8_gemm, products_with_constant_weights_bit_equal_to_ref) {
    for (const auto& c : {u8_relu(), s8_clip(), f32_out(), f32_out_float_bias(), u8_full_range_no_bias()}) {
        check_dot({2, 5, 12}, 6, c);
        check_dot({1, 33}, 40, c);     // one row
        check_dot({13, 256}, 17, c);
    }
    check_dot({128, 256}, 1024, s8_clip());  // bert_small's FFN shape, split between threads
}

TEST(cpu_int8_depthwise, depthwise_3x3_bit_equal_to_ref) {
    for (const auto& c : {u8_relu(), s8_clip(), f32_out(), f32_out_float_bias(), u8_full_range_no_bias()}) {
        check_depthwise(1, 19, 7, 9, 1, 1, c);
        check_depthwise(2, 8, 6, 5, 2, 1, c);
        check_depthwise(1, 32, 9, 9, 2, 0, c);
        check_depthwise(1, 5, 1, 1, 1, 1, c);
    }
    check_depthwise(1, 144, 28, 28, 2, 1, u8_relu());
}

qcase s8_exact() {  // s8 in and out, int32 bias: the AVX2 kernel requantizes in its own loop
    qcase c = s8_clip();
    c.bias = 1;
    return c;
}

TEST(cpu_int8_depthwise, tiling_edges_bit_equal_to_ref) {
    // The AVX2 kernel's tiling: 16-channel blocks (40 = 16 + 16 + 8), strips of 8 output
    // rows across batch items, scratch columns for stride 2 and padding 0 to 2, one-pixel
    // rows, and the row counts the threads split.
    for (const auto& c : {u8_relu(), s8_exact(), s8_clip(), f32_out()}) {
        check_depthwise(2, 40, 7, 8, 2, 1, c);
        check_depthwise(2, 40, 19, 11, 1, 1, c);
        check_depthwise(1, 17, 5, 4, 1, 2, c);
        check_depthwise(3, 33, 6, 3, 2, 0, c);
        check_depthwise(1, 48, 4, 1, 1, 1, c);
    }
    check_depthwise(2, 96, 56, 56, 1, 1, s8_exact());
    // Exact ties in ref (acc / 500 with acc = 250 mod 500) that the vector loop's fast
    // quotient (acc times fl(scale fl(1 / y_scale))) misses by an ulp: its check must send
    // them through ref's division.
    qcase wide = u8_full_range_no_bias();
    wide.x_scale = 0.01f;
    wide.w_scale = 0.01f;
    wide.y_scale = 0.05f;
    wide.y_zero = 3;
    check_depthwise(2, 96, 56, 56, 1, 1, wide);
}

TEST(cpu_int8_gemm, vnni_kernel_available) {
    if (!cpu::has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI here: the VNNI GEMM's cases did not run";
}

TEST(cpu_int8_gemm, vnni_program_loads_and_runs_without_vnni) {
    // Packed for VNNI (bytes, comp shifted for s8 a), loaded where the VNNI kernel is capped
    // (as on an AVX2 CPU): the AVX2 and portable kernels widen the weights on the first run and
    // keep them, results bit-equal on both runs.
    if (!cpu::has_avx512_vnni()) GTEST_SKIP() << "no AVX-512 VNNI here";
    for (const auto& c : {s8_clip(), u8_relu(), f32_out()}) {
        builder b;
        const auto lo = c.x_type == type::int8 ? -128 : 0, hi = c.x_type == type::int8 ? 127 : 255;
        auto al = random_ints(c.x_type, {37, 45}, lo, hi);
        b.inputs["a"] = al.get_argument();
        auto a = b.m->add_parameter("a", al.get_shape());
        op::quant_dot q;
        set_params(q, c, 23);
        std::vector<instruction_ref> args{a, b.m->add_literal(random_ints(type::int8, {45, 23}, -128, 127))};
        if (c.bias) args.push_back(bias_literal(b, c, 23));
        b.ret({b.m->add_instruction(q, args)});
        program ref = b.p;
        ref.compile(*get_target("ref"));
        program cpu = b.p;
        {
            test::env_override own("KILN_CPU_INT8_KERNELS", "own");
            cpu.compile(*get_target("cpu"));
        }
        ASSERT_EQ(count_ops(cpu, "cpu::int8_gemm"), 1u) << text(cpu);
        const auto bytes = save_buffer(cpu);
        const auto want = ref.eval(b.inputs);
        for (const char* cap : {"", "avx2", "generic"}) {
            SCOPED_TRACE(std::string("cap ") + cap);
            test::env_override isa("KILN_CPU_PACKED_GEMM_ISA", cap);
            auto loaded = load_buffer(bytes.data(), bytes.size());
            for (int run = 0; run < 2; ++run) {  // the widened copies made, then reused
                auto got = loaded.eval(b.inputs);
                ASSERT_EQ(got.size(), 1u);
                expect_close(got[0], want[0], 0.0, 0.0);
            }
        }
    }
}

TEST(cpu_int8_gemm, float_fallback_when_asked) {
    // KILN_CPU_INT8_KERNELS=float: the ops go back to float kernels (dequantize_without_vnni).
    if (cpu::has_int8_dot_product()) GTEST_SKIP() << "VNNI: oneDNN's int8 kernels";
    test::env_override fl("KILN_CPU_INT8_KERNELS", "float");
    builder b;
    auto xl = random_ints(type::uint8, {1, 8, 3, 3}, 0, 255);
    b.inputs["x"] = xl.get_argument();
    auto x = b.m->add_parameter("x", xl.get_shape());
    auto wt = b.m->add_literal(random_ints(type::int8, {4, 8, 1, 1}, -127, 127));
    op::quant_convolution q;
    q.padding = {0, 0, 0, 0};
    q.stride = {1, 1};
    q.dilation = {1, 1};
    set_params(q, f32_out(), 4);
    q.has_bias = false;
    b.ret({b.m->add_instruction(q, {x, wt})});
    auto r = run_both(b, 1e-4, 1e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::int8_gemm"), 0u) << text(r.cpu);
}

TEST(cpu_int8_gemm, saved_program_loads_and_runs_with_either_kernel) {
    // A 1x1 layer into a depthwise one: the .kiln holds the packed constants, the kernels
    // are chosen again at load (here: the CPU's, then the portable ones), results bit-equal.
    if (cpu::has_int8_dot_product()) GTEST_SKIP() << "VNNI: oneDNN's int8 kernels";
    builder b;
    auto xl = random_ints(type::uint8, {1, 19, 6, 7}, 0, 255);
    b.inputs["x"] = xl.get_argument();
    auto x = b.m->add_parameter("x", xl.get_shape());
    op::quant_convolution q;
    q.padding = {0, 0, 0, 0};
    q.stride = {1, 1};
    q.dilation = {1, 1};
    set_params(q, u8_relu(), 24);
    auto y = b.m->add_instruction(q, {x, b.m->add_literal(random_ints(type::int8, {24, 19, 1, 1}, -127, 127)),
                                      bias_literal(b, u8_relu(), 24)});
    op::quant_convolution dw = q;
    dw.padding = {1, 1, 1, 1};
    dw.stride = {2, 2};
    dw.group = 24;
    qcase c = s8_clip();
    c.x_type = type::uint8;
    set_params(dw, c, 24);
    dw.x_zero_point = q.y_zero_point;
    b.ret({b.m->add_instruction(dw, {y, b.m->add_literal(random_ints(type::int8, {24, 1, 3, 3}, -127, 127)),
                                     bias_literal(b, c, 24)})});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::int8_gemm"), 1u) << text(cpu);
    ASSERT_EQ(count_ops(cpu, "cpu::int8_depthwise"), 1u) << text(cpu);
    const auto bytes = save_buffer(cpu);
    const auto want = ref.eval(b.inputs);
    for (bool generic : {false, true}) {
        test::env_override isa("KILN_CPU_PACKED_GEMM_ISA", generic ? "generic" : "");
        auto loaded = load_buffer(bytes.data(), bytes.size());
        EXPECT_EQ(count_ops(loaded, "cpu::int8_depthwise"), 1u);
        auto got = loaded.eval(b.inputs);
        ASSERT_EQ(got.size(), 1u);
        expect_close(got[0], want[0], 0.0, 0.0);
    }
}
