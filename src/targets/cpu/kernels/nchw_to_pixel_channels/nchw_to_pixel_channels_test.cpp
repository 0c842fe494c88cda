// The copy of a plain NCHW image batch with 1-4 channels into the layout its first
// convolution reads (cpu::nchw_to_pixel_channels): a convolution over such an input
// matches the ref target for every channel count and several batches (on AVX-512 CPUs,
// where oneDNN's convolutions read channels-last, through this op); the op itself writes
// channels-last and oneDNN's 8- and 16-channel blocks with zero padding channels; a saved
// program loads and runs; it refuses what it cannot copy; KILN_CPU_INPUT_REORDER=dnnl keeps
// oneDNN's reorder.
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/nchw_to_pixel_channels/nchw_to_pixel_channels.hpp"

#include <kiln/errors.hpp>
#include <kiln/serialize.hpp>

#include <cmath>
#include <limits>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// conv 3x3 stride 2 (a vision model's stem) over x, 16 output channels.
builder build(const std::vector<std::size_t>& x_dims) {
    builder b;
    auto x = b.param("x", x_dims);
    auto w = b.constant({16, x_dims[1], 3, 3}, 0.4f);
    b.ret({b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}, {"stride", arr({2, 2})}},
                {x, w, b.constant({16})})});
    return b;
}

// block 0: channels-last; 8 or 16: oneDNN's channel blocks.
cpu::md_record layout(const std::vector<std::size_t>& dims, std::int64_t block) {
    return cpu::pixel_channels_layout(block, dims);
}

}  // namespace

TEST(cpu_nchw_to_pixel_channels, convolutions_over_1_to_4_channels_match_ref) {
    for (std::size_t c : {1u, 2u, 3u, 4u})
        for (std::size_t n : {1u, 2u}) {
            auto r = run_both(build({n, c, 37, 45}), 2e-4, 2e-4);
            const auto used = count_ops(r.cpu, "cpu::nchw_to_pixel_channels");
            EXPECT_LE(used, 1u) << text(r.cpu);
            // On AVX-512 oneDNN's convolutions read channels-last: the 3-channel stem's
            // input comes through this copy.
            if (cpu::has_avx512() && c == 3) {
                EXPECT_EQ(used, 1u) << text(r.cpu);
            }
        }
}

TEST(cpu_nchw_to_pixel_channels, writes_channels_last_and_channel_blocks_with_zero_padding) {
    builder any = build({1, 3, 8, 8});
    program p = any.p;
    p.compile(*get_target("cpu"));
    auto& ctx = p.get_context();
    for (std::size_t c : {1u, 2u, 3u, 4u})
        for (std::int64_t t : {0, 8, 16}) {
            const std::vector<std::size_t> dims{2, c, 5, 1031};  // pixels past one task's 4096
            cpu::nchw_to_pixel_channels op;
            op.dst_layout = layout(dims, t);
            const shape xs(type::float32, dims);
            const literal x(xs, random_values(xs.elements()));
            std::size_t bytes = sizeof(float);
            for (auto d : op.dst_layout.padded_dims) bytes *= static_cast<std::size_t>(d);
            argument buf(shape(type::uint8, {bytes}));
            auto* raw = reinterpret_cast<float*>(buf.data());
            std::fill(raw, raw + bytes / sizeof(float), std::numeric_limits<float>::quiet_NaN());
            const auto out = op.compute_shape({xs, buf.get_shape()});
            EXPECT_EQ(out, xs);
            op.compute(ctx, out, {x.get_argument(), buf});
            const std::size_t g = t == 0 ? c : static_cast<std::size_t>(t), hw = 5 * 1031;
            const auto xv = x.to_vector<float>();
            for (std::size_t i = 0; i < 2; ++i)
                for (std::size_t q = 0; q < hw; ++q)
                    for (std::size_t ch = 0; ch < g; ++ch) {
                        const float got = raw[(i * hw + q) * g + ch];
                        const float want = ch < c ? xv[(i * c + ch) * hw + q] : 0.0f;
                        ASSERT_EQ(got, want) << "c " << c << " g " << g << " image " << i << " pixel " << q
                                             << " channel " << ch;
                    }
        }
}

TEST(cpu_nchw_to_pixel_channels, refuses_what_it_cannot_copy) {
    cpu::nchw_to_pixel_channels op;
    const shape buf(type::uint8, {1u << 20});
    op.dst_layout = layout({1, 5, 4, 4}, 0);  // 5 channels
    EXPECT_THROW(op.compute_shape({shape(type::float32, {1, 5, 4, 4}), buf}), kiln::error);
    op.dst_layout = layout({1, 3, 4, 4}, 0);
    EXPECT_THROW(op.compute_shape({shape(type::float32, {1, 3, 4, 5}), buf}), kiln::error);  // other dims
    EXPECT_THROW(op.compute_shape({shape(type::float32, {1, 3, 4, 4}, {48, 1, 12, 3}), buf}), kiln::error);
    EXPECT_THROW(op.compute_shape({shape(type::float32, {1, 3, 4, 4}), shape(type::uint8, {100})}), kiln::error);
    op.dst_layout = cpu::md_record{};  // no layout
    EXPECT_THROW(op.compute_shape({shape(type::float32, {1, 3, 4, 4}), buf}), kiln::error);
    op.dst_layout = layout({1, 3, 4, 4}, 0);
    EXPECT_NO_THROW(op.compute_shape({shape(type::float32, {1, 3, 4, 4}), buf}));
}

TEST(cpu_nchw_to_pixel_channels, saved_program_loads_and_runs) {
    if (!cpu::has_avx512()) GTEST_SKIP() << "the stem reads channels-last only on AVX-512 CPUs";
    auto b = build({2, 3, 30, 30});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::nchw_to_pixel_channels"), 1u) << text(cpu);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    ASSERT_EQ(count_ops(loaded, "cpu::nchw_to_pixel_channels"), 1u);
    expect_close(loaded.eval(b.inputs)[0], ref.eval(b.inputs)[0], 2e-4, 2e-4);
}

TEST(cpu_nchw_to_pixel_channels, switched_off) {
    test::env_override off("KILN_CPU_INPUT_REORDER", "dnnl");
    auto r = run_both(build({1, 3, 37, 45}), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::nchw_to_pixel_channels"), 0u) << text(r.cpu);
}
