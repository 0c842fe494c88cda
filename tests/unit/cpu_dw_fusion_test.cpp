// Depthwise fusion on the cpu target: a 1x1 convolution (with its activation) whose
// result feeds only a depthwise 3x3 convolution runs as one oneDNN primitive. Each case
// checks the results against the ref target; whether oneDNN fuses depends on the CPU
// (cache size, ISA), so the fused-op count is asserted only against what the same
// build reports with the fusion switched off.
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"

#include <kiln/serialize.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value conv_attrs(std::int64_t pad, std::int64_t stride, std::int64_t group) {
    return value::object{{"padding", value(value::array{pad, pad, pad, pad})},
                         {"stride", value(value::array{stride, stride})},
                         {"group", value(group)}};
}

enum class act { relu6, silu };

instruction_ref activation(builder& b, instruction_ref y, act a) {
    if (a == act::relu6) return b.op("clip", {y, b.scalar(0.0f), b.scalar(6.0f)});
    return b.op("mul", {y, b.op("sigmoid", {y})});
}

// x (1, ic, h, w) -> 1x1 conv to c channels + act -> depthwise 3x3 (stride s, pad 1) + act
// [-> 1x1 projection].
builder inverted_residual(std::size_t ic, std::size_t c, std::size_t h, std::size_t w, std::int64_t s, act a,
                          bool project) {
    builder b;
    auto x = b.param("x", {1, ic, h, w});
    auto e = b.op("convolution", conv_attrs(0, 1, 1), {x, b.constant({c, ic, 1, 1}, 0.5f), b.constant({c}, 0.2f)});
    auto d = b.op("convolution", conv_attrs(1, s, static_cast<std::int64_t>(c)),
                  {activation(b, e, a), b.constant({c, 1, 3, 3}, 0.5f), b.constant({c}, 0.2f)});
    auto y = activation(b, d, a);
    if (project) y = b.op("convolution", conv_attrs(0, 1, 1), {y, b.constant({16, c, 1, 1}, 0.3f)});
    b.ret({y});
    return b;
}

std::size_t fused_convs(const program& p) {
    std::size_t n = 0;
    for (const auto& ins : *p.get_main_module())
        if (ins.name() == "cpu::convolution" && ins.get_operator().to_value().at("dw").at("kernel").get_int64() > 0)
            ++n;
    return n;
}

// Runs the block on ref and on cpu with the fusion on and off; both match ref, and the
// fused program has one convolution less per fused pair.
std::size_t check_block(const builder& b) {
    both off;
    {
        test::env_override no_dw("KILN_CPU_DW_FUSION", "0");
        off = run_both(b, 1e-4, 1e-4);
    }
    EXPECT_EQ(fused_convs(off.cpu), 0u);
    auto on = run_both(b, 1e-4, 1e-4);
    const std::size_t fused = fused_convs(on.cpu);
    EXPECT_EQ(count_ops(on.cpu, "cpu::convolution") + fused, count_ops(off.cpu, "cpu::convolution")) << text(on.cpu);
    EXPECT_TRUE(ref_kernels(on.cpu).empty()) << text(on.cpu);
    std::cout << "[ fused ] " << fused << " pair(s)\n";
    return fused;
}

}  // namespace

// Large enough (the 1x1 result is 5 MiB) that oneDNN fuses on a CPU with up to 2.5 MiB of
// L2 for the threads; smaller results fall back to two primitives.
TEST(cpu_dw_fusion, stride2_relu6_projected) {
    KILN_CPU_NEEDS_OPS("clip");
    check_block(inverted_residual(13, 48, 163, 167, 2, act::relu6, true));
}

TEST(cpu_dw_fusion, stride1_silu) {
    KILN_CPU_NEEDS_OPS("sigmoid", "mul");
    check_block(inverted_residual(13, 48, 161, 163, 1, act::silu, false));
}

TEST(cpu_dw_fusion, channels_not_a_multiple_of_8) {
    KILN_CPU_NEEDS_OPS("clip");
    // oneDNN's fused kernel wants whole channel blocks: 44 channels run unfused, still right.
    EXPECT_EQ(check_block(inverted_residual(13, 44, 163, 161, 2, act::relu6, true)), 0u);
    check_block(inverted_residual(7, 40, 151, 149, 1, act::relu6, false));
}

TEST(cpu_dw_fusion, small_blocks_stay_unfused_and_right) {
    KILN_CPU_NEEDS_OPS("clip");
    EXPECT_EQ(check_block(inverted_residual(16, 24, 9, 11, 2, act::relu6, true)), 0u);
}

TEST(cpu_dw_fusion, saved_program_loads_and_runs) {
    KILN_CPU_NEEDS_OPS("clip");
    auto b = inverted_residual(13, 48, 163, 167, 2, act::relu6, true);
    auto r = run_both(b, 1e-4, 1e-4);
    auto bytes = save_buffer(r.cpu);
    program loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(fused_convs(loaded), fused_convs(r.cpu));
    auto out = loaded.eval(b.inputs);
    ASSERT_EQ(out.size(), 1u);
    expect_close(out[0], r.ref_out[0], 1e-4, 1e-4);
}

// MobileNetV2's first block (96 channels at 112x112: a 4.8 MB 1x1 result). On AVX-512
// machines oneDNN picks channels-last brgemm kernels, which take no depthwise post-op; the
// lowering plans such a pair (and the convolutions before it at its size) in 16-channel
// blocks so that oneDNN's fused jit kernel runs it; KILN_CPU_DW_BLOCKED=0 leaves the
// layouts to oneDNN (and the pair unfused there).
TEST(cpu_dw_fusion, large_pairs_planned_blocked_on_avx512) {
    KILN_CPU_NEEDS_OPS("clip");
    builder b;
    auto x = b.param("x", {1, 3, 224, 224});
    auto stem = b.op("convolution", conv_attrs(1, 2, 1), {x, b.constant({32, 3, 3, 3}, 0.3f), b.constant({32}, 0.1f)});
    auto proj = b.op("convolution", conv_attrs(0, 1, 1),
                     {activation(b, stem, act::relu6), b.constant({16, 32, 1, 1}, 0.3f), b.constant({16}, 0.1f)});
    auto e = b.op("convolution", conv_attrs(0, 1, 1), {proj, b.constant({96, 16, 1, 1}, 0.5f), b.constant({96}, 0.2f)});
    auto d = b.op("convolution", conv_attrs(1, 2, 96),
                  {activation(b, e, act::relu6), b.constant({96, 1, 3, 3}, 0.5f), b.constant({96}, 0.2f)});
    b.ret({b.op("convolution", conv_attrs(0, 1, 1), {activation(b, d, act::relu6), b.constant({24, 96, 1, 1}, 0.3f)})});
    auto on = run_both(b, 1e-4, 1e-4);
    EXPECT_TRUE(ref_kernels(on.cpu).empty()) << text(on.cpu);
    if (!kiln::cpu::has_avx512()) return;
    EXPECT_EQ(fused_convs(on.cpu), 1u) << text(on.cpu);
    test::env_override off("KILN_CPU_DW_BLOCKED", "0");
    auto plain = run_both(b, 1e-4, 1e-4);
    EXPECT_EQ(fused_convs(plain.cpu), 0u) << text(plain.cpu);
}
