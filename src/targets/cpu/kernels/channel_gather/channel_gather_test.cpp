// Gathers of constant channels on the cpu target (cpu::channel_gather): a ShuffleNet block
// (concat of two convolutions, channel shuffle, split into halves, a convolution on each)
// matches the ref target on random data at batch 2 with channel counts that are not
// multiples of 8 or 16; the concat is never made and nothing runs on reference kernels;
// the kernel itself picks channels from parts in every pixel-channels layout into every
// kind of result, for a shuffle's pattern (two-window permutes) and for arbitrary ones
// (vector gathers, repeated channels); a saved program loads and runs;
// KILN_CPU_CHANNEL_GATHER=0 goes through plain layouts instead.
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/channel_gather/channel_gather.hpp"

#include <kiln/serialize.hpp>

#include <limits>
#include <numeric>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

instruction_ref conv(builder& b, instruction_ref x, std::size_t cin, std::size_t cout, std::size_t k) {
    const auto pad = static_cast<std::int64_t>(k / 2);
    return b.op("convolution", value::object{{"padding", arr({pad, pad, pad, pad})}},
                {x, b.constant({cout, cin, k, k}, 0.3f), b.constant({cout})});
}

instruction_ref half(builder& b, instruction_ref x, std::int64_t from, std::int64_t to) {
    return b.op("slice", value::object{{"axes", arr({1})}, {"starts", arr({from})}, {"ends", arr({to})}}, {x});
}

// concat(conv3x3(x), conv1x1(x)) -> shuffle in `groups` -> halves -> a convolution on each.
builder shuffle_block(std::size_t per_branch, std::size_t groups) {
    builder b;
    const std::size_t n = 2, cx = 12, hw = 9, c = 2 * per_branch;
    auto x = b.param("x", {n, cx, hw, hw});
    auto cat = b.op("concat", value::object{{"axis", value(1)}}, {conv(b, x, cx, per_branch, 3), conv(b, x, cx, per_branch, 1)});
    const auto sn = static_cast<std::int64_t>(n), sh = static_cast<std::int64_t>(hw);
    const auto g = static_cast<std::int64_t>(groups), per = static_cast<std::int64_t>(c / groups);
    auto r = b.op("reshape", value::object{{"dims", arr({sn, g, per, sh, sh})}}, {cat});
    auto t = b.op("transpose", value::object{{"perm", arr({0, 2, 1, 3, 4})}}, {r});
    auto s = b.op("reshape", value::object{{"dims", arr({sn, static_cast<std::int64_t>(c), sh, sh})}}, {t});
    const auto hc = static_cast<std::int64_t>(per_branch);
    b.ret({conv(b, half(b, s, 0, hc), per_branch, 8, 1), conv(b, half(b, s, hc, 2 * hc), per_branch, 8, 3)});
    return b;
}

}  // namespace

TEST(cpu_channel_gather, shuffle_block_matches_ref) {
    for (std::size_t per_branch : {10u, 29u, 24u})
        for (std::size_t groups : {2u, 4u}) {
            if ((2 * per_branch) % groups != 0) continue;
            auto r = run_both(shuffle_block(per_branch, groups), 2e-4, 2e-4);
            EXPECT_EQ(count_ops(r.cpu, "cpu::channel_gather"), 2u) << text(r.cpu);
            for (const char* gone : {"cpu::concat", "cpu::concat_plain", "concat", "transpose"})
                EXPECT_EQ(count_ops(r.cpu, gone), 0u) << gone << "\n" << text(r.cpu);
            EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        }
}

TEST(cpu_channel_gather, switched_off) {
    test::env_override off("KILN_CPU_CHANNEL_GATHER", "0");
    auto r = run_both(shuffle_block(10, 2), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::channel_gather"), 0u) << text(r.cpu);
}

TEST(cpu_channel_gather, saved_program_loads_and_runs) {
    auto b = shuffle_block(29, 2);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    {
        test::env_override no_grouping("KILN_CPU_FUSION", "0");  // as run_both compiles
        cpu.compile(*get_target("cpu"));
    }
    ASSERT_EQ(count_ops(cpu, "cpu::channel_gather"), 2u);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::channel_gather"), 2u);
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 2u);
    for (std::size_t i = 0; i < 2; ++i) expect_close(got[i], want[i], 2e-4, 2e-4);
}

namespace {

// The kernel alone, on layouts this CPU's oneDNN may never choose: parts of the given kinds
// (a channel block, -1 plain, 0 channels-last) into each kind of result.
void every_result_layout(const std::vector<std::int64_t>& kinds) {
    builder any;
    any.ret({any.op("relu", {any.param("x", {1, 2, 3, 3})})});
    program p = any.p;
    p.compile(*get_target("cpu"));
    auto& ctx = p.get_context();
    const std::size_t n = 2, h = 5, w = 7, hw = h * w;
    const std::vector<std::size_t> channels{16, 12, 5, 24};
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
    cpu::channel_gather op;
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
        args.push_back(r.empty() ? buf.reshape(shapes.back()) : buf);
    }
    // The value of channel s of the concatenation.
    auto value_of = [&](std::size_t img, std::size_t s, std::size_t px) {
        for (std::size_t k = 0; k < channels.size(); ++k) {
            if (s < channels[k]) return values[k][(img * channels[k] + s) * hw + px];
            s -= channels[k];
        }
        return std::numeric_limits<float>::quiet_NaN();
    };
    // A shuffle's half (two windows per 16 channels), and channels in a scattered order
    // with repeats (vector gathers).
    std::vector<std::vector<std::int64_t>> sources(2);
    for (std::int64_t k = 0; k < 28; ++k) sources[0].push_back((k % 2) * 28 + k / 2);
    for (std::int64_t k = 0; k < 37; ++k) sources[1].push_back((k * 23 + 5) % 57);
    sources[1][7] = sources[1][8] = 56;
    for (const auto& source : sources)
        for (std::int64_t kind : {16, 8, 0, -1}) {
            const std::size_t c = source.size();
            op.source = source;
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
            op.finalize(ctx, s, in_shapes);
            op.compute(ctx, s, in_args);
            for (std::size_t i = 0; i < n; ++i) {
                for (std::size_t oc = 0; oc < c; ++oc)
                    for (std::size_t px = 0; px < hw; ++px)
                        ASSERT_EQ(y[at(op.layout, c, i, oc, px)], value_of(i, static_cast<std::size_t>(source[oc]), px))
                            << "result kind " << kind << " image " << i << " channel " << oc << " pixel " << px;
                if (kind > 0) {
                    for (std::size_t ch = c; ch < static_cast<std::size_t>(op.layout.padded_dims[1]); ++ch)
                        for (std::size_t px = 0; px < hw; ++px)
                            ASSERT_EQ(y[at(op.layout, c, i, ch, px)], 0.0f) << "padding channel " << ch;
                }
            }
        }
}

}  // namespace

// Parts in 8- and 16-channel blocks (one padded), plain and channels-last (read through a
// row), and parts all channels-last (read in place on AVX-512 where two windows fit).
TEST(cpu_channel_gather, every_layout_into_every_layout) {
    every_result_layout({16, 8, -1, 0});
    every_result_layout({0, 0, 0, 0});
}

TEST(cpu_channel_gather, bad_source_is_a_shape_error) {
    cpu::channel_gather op;
    op.parts = {cpu::md_record{}};
    op.source = {0, 3};
    const shape x(type::float32, {1, 3, 2, 2});
    EXPECT_THROW(op.compute_shape({x, shape(type::uint8, {1024})}), kiln::error);
}
