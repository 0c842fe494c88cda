// Concat -> inference BatchNormalization -> Relu as one pass (cpu::channel_affine): the
// pre-activation pattern of DenseNet matches the ref target on random non-zero data with
// non-trivial mean, variance, scale and bias, channel counts that are not multiples of 16,
// batch 2; parts from convolutions (oneDNN's layouts) and plain parameters mix; a BN without
// a relu after a concat; a lone BN stays on oneDNN; the kernel itself writes every pixel-
// channels layout (channel blocks with zero padding, channels-last, plain) from parts in any
// of them; a saved program loads and runs; KILN_CPU_CHANNEL_AFFINE=dnnl keeps oneDNN's ops.
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/channel_affine/channel_affine.hpp"

#include <kiln/serialize.hpp>

#include <cmath>
#include <limits>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// Variances in [0.05, 1.55]: positive, and far enough from 1 to matter.
instruction_ref variance(builder& b, std::size_t c) {
    auto v = random_values(c);
    for (auto& x : v) x = std::fabs(x) * 1.5f + 0.05f;
    return b.m->add_literal(literal(shape(type::float32, {c}), v));
}

// BN over x (mean and bias scaled up so that the relu clips a real share of values).
instruction_ref batch_norm(builder& b, instruction_ref x, std::size_t c) {
    return b.op("batch_norm_inference", value::object{{"epsilon", value(1e-3f)}},
                {x, b.constant({c}, 1.5f), b.constant({c}, 0.5f), b.constant({c}, 0.3f), variance(b, c)});
}

instruction_ref conv(builder& b, instruction_ref x, std::size_t cin, std::size_t cout, std::size_t k) {
    const auto pad = static_cast<std::int64_t>(k / 2);
    return b.op("convolution", value::object{{"padding", arr({pad, pad, pad, pad})}},
                {x, b.constant({cout, cin, k, k}, 0.3f), b.constant({cout})});
}

// A dense layer: concat(parts) -> BN -> [relu] -> 1x1 convolution to 20 channels.
// Parts: convolutions of x (in oneDNN's layouts) of the given channel counts, and x
// itself (plain) when `plain_part`.
builder dense_layer(std::size_t n, const std::vector<std::size_t>& convs, bool plain_part, bool relu) {
    builder b;
    const std::size_t cx = 12, hw = 9;
    auto x = b.param("x", {n, cx, hw, hw});
    std::vector<instruction_ref> parts;
    std::size_t c = 0;
    for (std::size_t k = 0; k < convs.size(); ++k) {
        parts.push_back(conv(b, x, cx, convs[k], 3));
        c += convs[k];
        if (k == 0 && plain_part) {
            parts.push_back(x);
            c += cx;
        }
    }
    auto y = batch_norm(b, b.op("concat", value::object{{"axis", value(1)}}, parts), c);
    if (relu) y = b.op("relu", {y});
    b.ret({conv(b, y, c, 20, 1)});
    return b;
}

void expect_one_pass(const program& p) {
    EXPECT_EQ(count_ops(p, "cpu::channel_affine"), 1u) << text(p);
    for (const char* gone : {"cpu::concat", "cpu::concat_plain", "cpu::batch_norm", "cpu::eltwise"})
        EXPECT_EQ(count_ops(p, gone), 0u) << gone << "\n" << text(p);
    EXPECT_TRUE(ref_kernels(p).empty()) << text(p);
}

}  // namespace

// A BN right after a convolution folds into its weights: after a max pooling it cannot.
TEST(cpu_channel_affine, bn_relu_after_a_pooling) {
    for (std::size_t c : {20u, 36u}) {
        builder b;
        auto x = b.param("x", {2, 12, 9, 9});
        auto pool = b.op("pooling",
                         value::object{{"mode", value(1)}, {"lengths", arr({3, 3})}, {"padding", arr({1, 1, 1, 1})}},
                         {conv(b, x, 12, c, 3)});
        auto y = b.op("relu", {batch_norm(b, pool, c)});
        b.ret({conv(b, y, c, 20, 1)});
        auto r = run_both(b, 2e-4, 2e-4);
        EXPECT_EQ(count_ops(r.cpu, "cpu::channel_affine"), 1u) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::batch_norm"), 0u) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    }
}

TEST(cpu_channel_affine, concat_bn_relu_of_convolutions_and_a_plain_part) {
    for (bool plain_part : {false, true}) {
        auto r = run_both(dense_layer(2, {20, 12, 36}, plain_part, true), 2e-4, 2e-4);
        expect_one_pass(r.cpu);
    }
}

TEST(cpu_channel_affine, concat_bn_without_relu) {
    auto r = run_both(dense_layer(2, {20, 12}, true, false), 2e-4, 2e-4);
    expect_one_pass(r.cpu);
}

TEST(cpu_channel_affine, plain_parts_give_a_plain_result) {
    builder b;
    auto x = b.param("x", {2, 5, 6, 7});
    auto z = b.param("z", {2, 3, 6, 7});
    b.ret({b.op("relu", {batch_norm(b, b.op("concat", value::object{{"axis", value(1)}}, {x, z, x}), 13)})});
    auto r = run_both(b, 1e-5, 1e-5);
    expect_one_pass(r.cpu);
}

TEST(cpu_channel_affine, lone_batch_norm_stays_on_onednn) {
    builder b;
    auto x = b.param("x", {2, 7, 5, 3});
    b.ret({batch_norm(b, x, 7)});
    auto r = run_both(b, 1e-5, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::channel_affine"), 0u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::batch_norm"), 1u) << text(r.cpu);
}

TEST(cpu_channel_affine, switched_off) {
    test::env_override off("KILN_CPU_CHANNEL_AFFINE", "dnnl");
    auto r = run_both(dense_layer(2, {20, 12}, false, true), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::channel_affine"), 0u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::batch_norm"), 1u) << text(r.cpu);
}

TEST(cpu_channel_affine, saved_program_loads_and_runs) {
    auto b = dense_layer(2, {20, 12}, true, true);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    {
        test::env_override no_grouping("KILN_CPU_FUSION", "0");  // as run_both compiles
        cpu.compile(*get_target("cpu"));
    }
    ASSERT_EQ(count_ops(cpu, "cpu::channel_affine"), 1u);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::channel_affine"), 1u);
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], 2e-4, 2e-4);
}

// The kernel alone, on layouts this CPU's oneDNN may never choose: parts in 8- and
// 16-channel blocks (one padded), channels-last and plain, into each kind of result.
TEST(cpu_channel_affine, every_layout_into_every_layout) {
    builder any;
    any.ret({any.op("relu", {any.param("x", {1, 2, 3, 3})})});
    program p = any.p;
    p.compile(*get_target("cpu"));
    auto& ctx = p.get_context();
    const std::size_t n = 2, h = 5, w = 7, hw = h * w;
    const std::vector<std::size_t> channels{16, 12, 5, 24};
    const std::vector<std::int64_t> kinds{16, 8, -1, 0};  // block, block, plain, channels-last
    const std::size_t c = 57;
    // Element (img, ch, pixel) of a tensor stored in `r` (empty: plain NCHW).
    auto at = [&](const cpu::md_record& r, std::size_t chs, std::size_t img, std::size_t ch, std::size_t px) {
        if (r.empty()) return (img * chs + ch) * hw + px;
        const auto g = static_cast<std::size_t>(cpu::pixel_channels(r));
        return img * static_cast<std::size_t>(r.strides[0]) + ch / g * static_cast<std::size_t>(r.strides[1]) +
               px * g + ch % g;
    };
    auto record = [&](std::int64_t kind, std::size_t chs) {
        return kind < 0 ? cpu::md_record{} : cpu::pixel_channels_layout(kind, {n, chs, h, w});
    };
    auto bytes_of = [&](const cpu::md_record& r, std::size_t chs) {
        std::size_t bytes = sizeof(float);  // padded_dims, not oneDNN: the tests do not link it
        for (auto d : r.padded_dims) bytes *= static_cast<std::size_t>(d);
        return r.empty() ? n * chs * hw * sizeof(float) : bytes;
    };
    std::vector<std::vector<float>> values;  // each part's NCHW values
    std::vector<argument> args;
    std::vector<shape> shapes;
    cpu::channel_affine op;
    op.relu = true;
    for (std::size_t k = 0; k < channels.size(); ++k) {
        const auto r = record(kinds[k], channels[k]);
        op.parts.push_back(r);
        values.push_back(random_values(n * channels[k] * hw));
        argument buf(shape(type::uint8, {bytes_of(r, channels[k])}));
        auto* raw = reinterpret_cast<float*>(buf.data());
        for (std::size_t i = 0; i < n; ++i)
            for (std::size_t ch = 0; ch < channels[k]; ++ch)
                for (std::size_t px = 0; px < hw; ++px)
                    raw[at(r, channels[k], i, ch, px)] = values[k][(i * channels[k] + ch) * hw + px];
        shapes.push_back(shape(type::float32, {n, channels[k], h, w}));
        // Plain parts travel as their tensor, the others as their buffer's bytes.
        args.push_back(r.empty() ? buf.reshape(shapes.back()) : buf);
    }
    const auto a = random_values(c), b = random_values(c);
    const shape vec(type::float32, {c});
    const literal al(vec, a), bl(vec, b);
    args.push_back(al.get_argument());
    args.push_back(bl.get_argument());
    shapes.push_back(vec);
    shapes.push_back(vec);
    for (std::int64_t kind : {16, 8, 0, -1}) {
        op.layout = record(kind, c);
        argument out(shape(type::uint8, {bytes_of(op.layout, c)}));
        auto* y = reinterpret_cast<float*>(out.data());
        std::fill(y, y + out.get_shape().bytes() / sizeof(float), std::numeric_limits<float>::quiet_NaN());
        auto in_shapes = shapes;
        in_shapes.push_back(out.get_shape());
        auto in_args = args;
        in_args.push_back(out);
        const auto s = op.compute_shape(in_shapes);
        EXPECT_EQ(s, shape(type::float32, {n, c, h, w}));
        op.compute(ctx, s, in_args);
        for (std::size_t i = 0; i < n; ++i) {
            std::size_t off = 0;
            for (std::size_t k = 0; k < channels.size(); ++k) {
                for (std::size_t ch = 0; ch < channels[k]; ++ch)
                    for (std::size_t px = 0; px < hw; ++px) {
                        const std::size_t oc = off + ch;
                        const float want = std::max(values[k][(i * channels[k] + ch) * hw + px] * a[oc] + b[oc], 0.0f);
                        ASSERT_NEAR(y[at(op.layout, c, i, oc, px)], want, 1e-5f)
                            << "result kind " << kind << " part " << k << " image " << i << " channel " << ch;
                    }
                off += channels[k];
            }
            // 57 channels in blocks of 8 or 16: the last block's padding is zero.
            if (kind > 0) {
                for (std::size_t ch = c; ch < static_cast<std::size_t>(op.layout.padded_dims[1]); ++ch)
                    for (std::size_t px = 0; px < hw; ++px)
                        ASSERT_EQ(y[at(op.layout, c, i, ch, px)], 0.0f) << "padding channel " << ch;
            }
        }
    }
}
