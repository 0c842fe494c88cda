// Global average pooling of activations in oneDNN's blocked or channels-last layouts on the
// cpu target (cpu::global_avg_pool): results match the ref target for GlobalAveragePool and
// for an AveragePool whose window is the whole image, channel counts below, at and past the
// kernel's 64-channel chunks and not multiples of the block, several batches; the result
// feeds a convolution (squeeze-and-excitation's shape); a saved program loads and runs;
// KILN_CPU_GLOBAL_POOL=dnnl keeps oneDNN's pooling; 8-bit levels (a folded dequantize) of more than 2^23
// pixels, which the int32 sums could not hold, are refused.
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/global_avg_pool/global_avg_pool.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include <kiln/serialize.hpp>

#include <cstdlib>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// conv 3x3 (its result in oneDNN's layout) -> average pool over each image -> 1x1 conv.
builder build(const std::vector<std::size_t>& x_dims, bool global) {
    builder b;
    auto x = b.param("x", x_dims);
    const std::size_t c = x_dims[1];
    auto w = b.constant({c, c, 3, 3}, 0.3f);
    auto y = b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}}, {x, w, b.constant({c})});
    value::object attrs{{"mode", value(0)}};
    if (global) {
        attrs.emplace_back("global", value(true));
    } else {
        attrs.emplace_back("lengths", arr({static_cast<std::int64_t>(x_dims[2]), static_cast<std::int64_t>(x_dims[3])}));
        attrs.emplace_back("stride", arr({1, 1}));
        attrs.emplace_back("padding", arr({0, 0, 0, 0}));
        attrs.emplace_back("dilation", arr({1, 1}));
    }
    y = b.op("pooling", attrs, {y});
    auto w2 = b.constant({8, c, 1, 1}, 0.3f);
    b.ret({b.op("convolution", value::object{}, {y, w2})});
    return b;
}

void check(const std::vector<std::size_t>& x_dims, bool global, std::size_t want = 1) {
    auto r = run_both(build(x_dims, global), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::global_avg_pool"), want) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

}  // namespace

TEST(cpu_global_avg_pool, global_and_whole_image_windows) {
    check({1, 64, 14, 14}, true);
    check({1, 64, 7, 9}, false);
}

TEST(cpu_global_avg_pool, channel_counts_and_batches) {
    for (std::size_t c : {8u, 40u, 72u, 200u}) check({2, c, 5, 6}, true);
    check({3, 24, 28, 28}, true);
}

TEST(cpu_global_avg_pool, switched_off) {
    test::env_override off("KILN_CPU_GLOBAL_POOL", "dnnl");
    check({1, 64, 14, 14}, true, 0);
}

TEST(cpu_global_avg_pool, saved_program_loads_and_runs) {
    auto b = build({2, 40, 9, 9}, true);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::global_avg_pool"), 1u) << text(cpu);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], 2e-4, 2e-4);
}

// Levels (a dequantize folded in: op_quant_test.cpp) are summed in int32: up to 2^23 pixels.
TEST(cpu_global_avg_pool, levels_of_more_than_2_pow_23_pixels_are_refused) {
    for (const std::size_t side : {2048u, 2900u}) {
        const std::vector<std::size_t> lens{1, 1, side, side};
        cpu::global_avg_pool op;
        op.layout = cpu::pixel_channels_layout(0, lens);
        op.dst_layout = cpu::pixel_channels_layout_like(op.layout, {1, 1, 1, 1});
        op.x_type = type::uint8;
        const std::vector<shape> in{shape(type::uint8, lens, cpu::channels_last_strides(lens)),
                                    shape(type::float32, {1, 1, 1, 1})};
        if (side * side <= (std::size_t{1} << 23))
            EXPECT_NO_THROW(op.compute_shape(in));
        else
            EXPECT_THROW(op.compute_shape(in), error);
    }
}
