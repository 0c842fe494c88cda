// Convolutions with few output pixels as im2col + packed GEMM (cpu::conv_gemm), results
// stored in oneDNN's blocked layout: 3x3 at 7x7 with bias and relu, stride 2 with a
// residual add, an uneven kernel with asymmetric padding and dilation, two images, the
// baseline kernels; match the ref target. KILN_CPU_CONV_GEMM=0 keeps oneDNN, many output
// pixels stay on oneDNN, and a saved program loads and runs. A residual added first is
// added in place (the product accumulates into the residual's buffer); with AVX-512, 1x1
// layers over many pixels whose data streams through memory are taken by default.
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/conv_gemm/conv_gemm.hpp"
#include "targets/cpu/cpu_features.hpp"

#include <kiln/serialize.hpp>

#include <cstdlib>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

struct conv_case {
    std::vector<std::size_t> x;  // N, C, H, W
    std::size_t out_channels = 64;
    std::vector<std::size_t> kernel{3, 3};
    std::vector<std::int64_t> stride{1, 1}, pads{1, 1, 1, 1}, dilation{1, 1};
    bool residual = false;
};

// A 1x1 convolution (its result in oneDNN's blocked layout) -> the convolution under test
// (+ bias, relu; or + a blocked residual, relu).
builder build(const conv_case& c) {
    builder b;
    auto x = b.param("x", c.x);
    auto w1 = b.constant({c.x[1], c.x[1], 1, 1}, 0.3f);
    auto a = b.op("convolution", value::object{}, {x, w1});
    auto w = b.constant({c.out_channels, c.x[1], c.kernel[0], c.kernel[1]}, 0.1f);
    auto y = b.op("convolution",
                  value::object{{"padding", arr(c.pads)}, {"stride", arr(c.stride)}, {"dilation", arr(c.dilation)}},
                  {a, w, b.constant({c.out_channels})});
    if (c.residual) {
        // Another blocked tensor of y's shape: a strided 1x1 convolution of x.
        auto wr = b.constant({c.out_channels, c.x[1], 1, 1}, 0.3f);
        auto r = b.op("convolution", value::object{{"stride", arr(c.stride)}}, {x, wr});
        y = b.op("add", {y, r});
    }
    b.ret({b.op("relu", {y})});
    return b;
}

// want 1: the convolution must be a conv_gemm where it fits (=all: on AVX-512 machines the
// default leaves it to oneDNN); 0: the rule (default, or the switch set) leaves it.
void check(const conv_case& c, std::size_t want = 1) {
    // Winograd would take the 3x3 layers first (F(2x2) from 16 tiles on AVX-512 machines),
    // and the residual's strided 1x1 would be a conv_gemm of its own there.
    test::env_override no_winograd("KILN_CPU_WINOGRAD", "0");
    test::env_override no_strided("KILN_CPU_CONV_GEMM_STRIDED", "0");
    const char* set = std::getenv("KILN_CPU_CONV_GEMM");
    const std::string mode = set ? set : "all";
    test::env_override all("KILN_CPU_CONV_GEMM", want == 1 ? mode.c_str() : set ? mode.c_str() : nullptr);
    auto r = run_both(build(c), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::conv_gemm"), want) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    // The residual add and the relu are the product's epilogue.
    if (want == 1) {
        EXPECT_EQ(count_ops(r.cpu, "cpu::binary"), 0u) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::eltwise"), 0u) << text(r.cpu);
    }
}

}  // namespace

TEST(cpu_conv_gemm, three_by_three_at_seven_by_seven) { check({{1, 64, 7, 7}, 64}); }

TEST(cpu_conv_gemm, stride_two_with_residual) {
    conv_case c{{1, 32, 14, 14}, 128};
    c.stride = {2, 2};
    c.residual = true;
    check(c);
}

TEST(cpu_conv_gemm, uneven_kernel_padding_dilation_and_batches) {
    conv_case c{{2, 16, 9, 8}, 64};
    c.kernel = {3, 2};
    c.pads = {2, 0, 1, 1};
    c.dilation = {2, 1};
    check(c);
}

TEST(cpu_conv_gemm, baseline_kernels) {
    test::env_override generic("KILN_CPU_PACKED_GEMM_ISA", "generic");
    conv_case c{{1, 32, 14, 14}, 64};
    c.stride = {2, 2};
    c.residual = true;
    check(c);
}

TEST(cpu_conv_gemm, switch_and_large_images_stay_on_onednn) {
    check({{1, 64, 28, 28}, 64, {3, 3}, {2, 2}, {0, 0, 0, 0}}, 1);  // 13 x 13 = 169 rows
    check({{1, 64, 30, 30}, 64, {3, 3}, {1, 1}, {0, 0, 0, 0}}, 0);  // 28 x 28 rows
    test::env_override off("KILN_CPU_CONV_GEMM", "0");
    check({{1, 64, 7, 7}, 64}, 0);
}

TEST(cpu_conv_gemm, one_by_one_read_in_place_or_gathered) {
    // Every convolution of the case (the 1x1 before, the one under test, the residual's) is
    // 1x1: all become conv_gemm, stride 1 reading x in place where x is channels-last.
    test::env_override one("KILN_CPU_CONV_GEMM", "1x1");
    conv_case c{{2, 64, 7, 7}, 96};
    c.kernel = {1, 1};
    c.pads = {0, 0, 0, 0};
    for (bool strided : {false, true}) {
        if (strided) {
            c.stride = {2, 2};
            c.residual = true;
        }
        auto r = run_both(build(c), 2e-4, 2e-4);
        EXPECT_EQ(count_ops(r.cpu, "cpu::convolution"), 0u) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::conv_gemm"), strided ? 3u : 2u) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    }
}

TEST(cpu_conv_gemm, default_rule_by_cpu) {
    // oneDNN's brgemm convolutions win on AVX-512 machines, except over very few pixels
    // (at most 64) with a window or with 2048 input channels; the packed products win on
    // AVX2 ones wherever there are few pixels and a window.
    test::env_override unset("KILN_CPU_CONV_GEMM", nullptr);
    test::env_override unset_tiny("KILN_CPU_CONV_GEMM_TINY", nullptr);
    test::env_override no_winograd("KILN_CPU_WINOGRAD", "0");
    const bool avx512 = kiln::cpu::has_avx512();
    auto r = run_both(build({{1, 64, 7, 7}, 64}), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::conv_gemm"), 1u) << text(r.cpu);
    auto wide = run_both(build({{1, 64, 9, 9}, 64}), 2e-4, 2e-4);  // 81 pixels
    EXPECT_EQ(count_ops(wide.cpu, "cpu::conv_gemm"), avx512 ? 0u : 1u) << text(wide.cpu);
    conv_case deep{{1, 2048, 7, 7}, 64};
    deep.kernel = {1, 1};
    deep.pads = {0, 0, 0, 0};
    auto d = run_both(build(deep), 2e-4, 2e-4);  // the 2048 -> 2048 1x1 before it too
    EXPECT_EQ(count_ops(d.cpu, "cpu::conv_gemm"), avx512 ? 2u : 0u) << text(d.cpu);
    deep.x = {1, 1024, 7, 7};
    auto shallow = run_both(build(deep), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(shallow.cpu, "cpu::conv_gemm"), 0u) << text(shallow.cpu);
    if (avx512) {
        test::env_override off("KILN_CPU_CONV_GEMM_TINY", "0");
        auto o = run_both(build({{1, 64, 7, 7}, 64}), 2e-4, 2e-4);
        EXPECT_EQ(count_ops(o.cpu, "cpu::conv_gemm"), 0u) << text(o.cpu);
    }
}

TEST(cpu_conv_gemm, saved_program_loads_and_runs) {
    test::env_override all("KILN_CPU_CONV_GEMM", "all");
    test::env_override no_winograd("KILN_CPU_WINOGRAD", "0");
    auto b = build({{1, 64, 7, 7}, 64});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::conv_gemm"), 1u);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::conv_gemm"), 1u);
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], 2e-4, 2e-4);
}

namespace {

// The conv_gemm instructions whose post-ops start with the in-place sum.
std::size_t accumulating(const program& p) {
    std::size_t n = 0;
    for (const auto& ins : *p.get_main_module()) {
        if (ins.name() != "cpu::conv_gemm") continue;
        const auto v = ins.get_operator().to_value();
        const auto& ops = v.at("post_ops").get_array();
        if (!ops.empty() && ops.front().at("kind").get_string() == "sum") ++n;
    }
    return n;
}

}  // namespace

TEST(cpu_conv_gemm, residual_added_in_place) {
    // The residual (a strided 1x1 of x, its own planned buffer, read by nothing else) is
    // the result's buffer: the product starts from it; relu follows in the epilogue.
    test::env_override all("KILN_CPU_CONV_GEMM", "all");
    conv_case c{{1, 32, 14, 14}, 64};
    c.stride = {2, 2};
    c.residual = true;
    auto r = run_both(build(c), 2e-4, 2e-4);
    EXPECT_EQ(accumulating(r.cpu), 1u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::binary"), 0u) << text(r.cpu);
    {
        test::env_override off("KILN_CPU_SUM_POST_OP", "0");
        auto kept = run_both(build(c), 2e-4, 2e-4);
        EXPECT_EQ(accumulating(kept.cpu), 0u) << text(kept.cpu);
        EXPECT_GE(count_ops(kept.cpu, "cpu::conv_gemm"), 1u) << text(kept.cpu);
    }
}

TEST(cpu_conv_gemm, tall_one_by_one_by_cpu) {
    // 2 x 56 x 56 pixels, 64 -> 256 channels with a residual: 14 MB through memory. With
    // AVX-512 the 1x1 under test is a conv_gemm adding the residual in place; the 1x1s
    // before it (3.2 and 8.0 MB: under 8 MiB) stay on oneDNN, as does everything without
    // AVX-512 (few output pixels only). The batch stays together (split_batch would run
    // it image by image, 7 MB each).
    test::env_override unset("KILN_CPU_CONV_GEMM", nullptr);
    test::env_override whole_batch("KILN_CPU_SPLIT_BATCH", "0");
    conv_case c{{2, 64, 56, 56}, 256};
    c.kernel = {1, 1};
    c.pads = {0, 0, 0, 0};
    c.residual = true;
    auto r = run_both(build(c), 2e-4, 2e-4);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    if (kiln::cpu::has_avx512()) {
        EXPECT_EQ(count_ops(r.cpu, "cpu::conv_gemm"), 1u) << text(r.cpu);
        EXPECT_EQ(accumulating(r.cpu), 1u) << text(r.cpu);
    } else {
        EXPECT_EQ(count_ops(r.cpu, "cpu::conv_gemm"), 0u) << text(r.cpu);
    }
    // One image of 28 x 28: the data stays in the caches, oneDNN keeps it.
    conv_case small{{1, 64, 28, 28}, 256};
    small.kernel = {1, 1};
    small.pads = {0, 0, 0, 0};
    small.residual = true;
    auto s = run_both(build(small), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(s.cpu, "cpu::conv_gemm"), 0u) << text(s.cpu);
}

// ResNet's downsampling projection (1x1, stride 2) with few output pixels: on AVX-512
// machines a conv_gemm by default (its rows gathered), oneDNN's with the switch off or
// with many pixels; with 1024 input channels the gathered rows are padded (4 KiB apart
// they would share one L1 set), and a saved program keeps the padding.
TEST(cpu_conv_gemm, strided_one_by_one_by_cpu) {
    test::env_override unset("KILN_CPU_CONV_GEMM", nullptr);
    auto projection = [](std::size_t c, std::size_t hw, std::size_t oc) {
        builder b;
        auto x = b.param("x", {1, c, hw, hw});
        auto y = b.op("convolution", value::object{}, {x, b.constant({c, c, 1, 1}, 0.05f)});  // a oneDNN layout
        auto z = b.op("convolution", value::object{{"stride", arr({2, 2})}}, {y, b.constant({oc, c, 1, 1}, 0.05f), b.constant({oc})});
        b.ret({b.op("relu", {z})});
        return b;
    };
    const std::size_t want = kiln::cpu::has_avx512() ? 1u : 0u;
    auto r = run_both(projection(64, 14, 128), 2e-4, 2e-4);  // 49 rows
    EXPECT_EQ(count_ops(r.cpu, "cpu::conv_gemm"), want) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    auto many = run_both(projection(32, 64, 64), 2e-4, 2e-4);  // 1024 rows
    EXPECT_EQ(count_ops(many.cpu, "cpu::conv_gemm"), 0u) << text(many.cpu);
    {
        test::env_override off("KILN_CPU_CONV_GEMM_STRIDED", "0");
        auto o = run_both(projection(64, 14, 128), 2e-4, 2e-4);
        EXPECT_EQ(count_ops(o.cpu, "cpu::conv_gemm"), 0u) << text(o.cpu);
    }
    if (!want) return;
    auto b = projection(1024, 10, 64);  // 25 rows of 1024 channels
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    const kiln::cpu::conv_gemm* op = nullptr;
    for (const auto& ins : *cpu.get_main_module())
        if (auto* g = ins.get_operator().any_cast<kiln::cpu::conv_gemm>()) op = g;
    ASSERT_NE(op, nullptr) << text(cpu);
    EXPECT_EQ(op->a_stride, 1040);
    expect_close(cpu.eval(b.inputs)[0], ref.eval(b.inputs)[0], 2e-4, 2e-4);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    expect_close(loaded.eval(b.inputs)[0], ref.eval(b.inputs)[0], 2e-4, 2e-4);
}
