// Winograd 3x3 convolutions on the cpu target (cpu::winograd_conv): results match the
// ref target's direct convolution for odd sizes, channel counts that are not multiples
// of the layout's block, several batches and groups of tiles, bias, ReLU and residual
// adds; F(2x2) and the baseline (non-AVX2) kernels too; saved programs load and run;
// KILN_CPU_WINOGRAD=0 keeps oneDNN's direct kernels.
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"
#include "targets/cpu/kernels/winograd/winograd.hpp"

#include <kiln/serialize.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value conv_attrs(std::vector<std::int64_t> pads) {
    value::array p;
    for (auto v : pads) p.push_back(value(v));
    return value::object{{"padding", value(p)}, {"group", value(1)}};
}

struct conv_case {
    std::vector<std::size_t> x;  // N, C, H, W
    std::size_t cout;
    std::vector<std::int64_t> pads{1, 1, 1, 1};
    bool bias = true, relu = true, residual = false;
};

// conv (+ bias) (+ residual add) (+ relu), the residual being a second parameter.
builder build(const conv_case& c) {
    builder b;
    auto x = b.param("x", c.x);
    auto w = b.constant({c.cout, c.x[1], 3, 3}, 0.2f);
    std::vector<instruction_ref> args{x, w};
    if (c.bias) args.push_back(b.constant({c.cout}));
    auto y = b.op("convolution", conv_attrs(c.pads), args);
    if (c.residual) {
        const auto& s = y->get_shape().lens();
        y = b.op("add", {y, b.param("r", {s[0], s[1], s[2], s[3]})});
    }
    if (c.relu) y = b.op("relu", {y});
    b.ret({y});
    return b;
}

// Whether the program left a convolution to oneDNN because oneDNN keeps its input or result
// channels-last (its choice on AVX-512 machines) with channels that are not a multiple of
// 8, which the Winograd transforms' 8-lane vectors do not take.
bool unaligned_channels_last(const program& p) {
    for (const auto& ins : *p.get_main_module())
        if (const auto* op = ins.get_operator().any_cast<cpu::convolution>()) {
            const auto x = op->layouts.empty() ? std::int64_t{0} : cpu::pixel_channels(op->layouts[0]);
            const auto y = cpu::pixel_channels(op->dst_layout);
            if (x % 8 != 0 || y % 8 != 0) return true;
        }
    return false;
}

// want_winograd 1: the convolution must be Winograd whatever its size (=all: the tile
// count that pays differs between AVX2 and AVX-512 machines); 0: the default rule must
// leave it to oneDNN.
void check(const conv_case& c, std::size_t want_winograd = 1, compile_options opts = {}) {
    const char* set = std::getenv("KILN_CPU_WINOGRAD");
    const std::string mode = set ? set : "all";
    test::env_override all("KILN_CPU_WINOGRAD", want_winograd == 1 ? mode.c_str() : set ? mode.c_str() : nullptr);
    auto b = build(c);
    auto r = run_both(b, 2e-4, 2e-4, opts);
    if (want_winograd == 1 && (c.x[1] % 8 != 0 || c.cout % 8 != 0) && unaligned_channels_last(r.cpu))
        want_winograd = 0;
    EXPECT_EQ(count_ops(r.cpu, "cpu::winograd_conv"), want_winograd) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

}  // namespace

TEST(cpu_winograd, odd_sizes_bias_relu) { check({{1, 32, 17, 15}, 40}); }

TEST(cpu_winograd, channels_not_multiples_of_the_block_batch_3_residual) {
    check({{3, 36, 9, 17}, 35, {1, 1, 1, 1}, false, true, true});
}

TEST(cpu_winograd, no_padding_and_uneven_padding) {
    check({{2, 33, 18, 11}, 48, {0, 0, 0, 0}, true, false});
    check({{3, 40, 7, 9}, 32, {2, 0, 1, 2}, true, true, true});
}

TEST(cpu_winograd, several_groups_of_tiles) {
    // 3 x 8 x 8 tiles of 27 KiB each: more than one group in the scratchpad.
    check({{3, 64, 30, 30}, 128, {1, 1, 1, 1}, true, true, true});
}

TEST(cpu_winograd, work_split_over_tiles_or_channels_for_any_thread_count) {
    // 16 tiles: the threads split the output channels; 147 tiles: the tiles.
    for (std::size_t threads : {1, 2, 3, 4}) {
        compile_options opts;
        opts.threads = threads;
        check({{1, 64, 14, 14}, 72, {1, 1, 1, 1}, true, true, true}, 1, opts);
        check({{3, 40, 27, 25}, 48}, 1, opts);
    }
}

TEST(cpu_winograd, f2x2_and_baseline_kernels) {
    {
        test::env_override f2("KILN_CPU_WINOGRAD", "2");
        check({{3, 36, 9, 17}, 35, {1, 1, 1, 1}, true, true, true});
        check({{2, 32, 9, 17}, 40, {1, 1, 1, 1}, true, true, true});
    }
    for (const char* isa : {"avx2", "generic"}) {
        test::env_override cap("KILN_CPU_WINOGRAD_ISA", isa);
        check({{3, 36, 9, 17}, 35, {1, 1, 1, 1}, true, true, true});
        check({{1, 64, 14, 14}, 40});
    }
}

TEST(cpu_winograd, switched_off_and_small_channel_counts) {
    {
        test::env_override off("KILN_CPU_WINOGRAD", "0");
        check({{1, 32, 17, 15}, 40}, 0);
    }
    check({{1, 8, 17, 15}, 40}, 0);  // too few input channels: oneDNN's direct kernel
    check({{1, 64, 5, 5}, 64}, 0);   // 4 tiles (9 of 2x2): too few for the transformed weights' traffic
}

TEST(cpu_winograd, two_by_two_tiles_from_sixteen_with_avx512) {
    // 7x7: 4 tiles of 4x4, 16 of 2x2. With AVX-512 F(2x2) takes it (its products prefetch
    // the transformed weights); without, 4 tiles are too few for either.
    test::env_override unset("KILN_CPU_WINOGRAD", nullptr);
    auto r = run_both(build({{1, 64, 7, 7}, 64}), 2e-4, 2e-4);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    std::size_t two = 0;
    for (const auto& ins : *r.cpu.get_main_module())
        if (const auto* op = ins.get_operator().any_cast<cpu::winograd_conv>()) two += op->m == 2 ? 1 : 0;
    EXPECT_EQ(count_ops(r.cpu, "cpu::winograd_conv"), cpu::has_avx512() ? 1u : 0u) << text(r.cpu);
    EXPECT_EQ(two, cpu::has_avx512() ? 1u : 0u) << text(r.cpu);
}

TEST(cpu_winograd, saved_program_loads_and_runs) {
    test::env_override all("KILN_CPU_WINOGRAD", "all");
    auto b = build({{2, 32, 15, 13}, 40, {1, 1, 1, 1}, true, true, true});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::winograd_conv"), 1u);
    const auto bytes = save_buffer(cpu);
    auto want = ref.eval(b.inputs);
    // Loaded here, and as on a CPU without AVX2 (the kernels are picked at load).
    for (const char* isa : {"", "avx2", "generic"}) {
        test::env_override env("KILN_CPU_WINOGRAD_ISA", *isa ? isa : nullptr);
        auto loaded = load_buffer(bytes.data(), bytes.size());
        EXPECT_EQ(count_ops(loaded, "cpu::winograd_conv"), 1u);
        auto got = loaded.eval(b.inputs);
        ASSERT_EQ(got.size(), 1u);
        expect_close(got[0], want[0], 2e-4, 2e-4, isa);
    }
}

// fashion_resnet's 14x14 layers at batch 16: groups of 64 tiles of 32 channels, rows of V and
// M 8 KiB apart unless padded to an odd number of cache lines. Both ways give the direct
// convolution's values: padded as compiled now, and unpadded as in a program saved before
// the padding (no odd_rows attribute), whose scratchpad was sized without it.
TEST(cpu_winograd, rows_padded_to_an_odd_number_of_lines_and_as_saved_before) {
    test::env_override all("KILN_CPU_WINOGRAD", "all");
    auto b = build({{16, 32, 14, 14}, 32, {1, 1, 1, 1}, true, true, true});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    const auto want = ref.eval(b.inputs);
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    auto* mm = cpu.get_main_module();
    std::size_t found = 0;
    for (auto it = mm->begin(); it != mm->end(); ++it)
        if (const auto* op = it->get_operator().any_cast<cpu::winograd_conv>()) {
            EXPECT_TRUE(op->odd_rows);
            EXPECT_EQ(op->m, 4);
            ++found;
        }
    ASSERT_EQ(found, 1u) << text(cpu);
    expect_close(cpu.eval(b.inputs)[0], want[0], 2e-4, 2e-4, "odd rows");
    for (auto it = mm->begin(); it != mm->end(); ++it)
        if (const auto* op = it->get_operator().any_cast<cpu::winograd_conv>()) {
            auto old = *op;
            old.odd_rows = false;
            old.ready.reset();
            mm->replace_instruction(it, old, it->inputs());
            break;
        }
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    for (const auto& ins : *loaded.get_main_module())
        if (const auto* op = ins.get_operator().any_cast<cpu::winograd_conv>()) {
            EXPECT_FALSE(op->odd_rows);
        }
    expect_close(loaded.eval(b.inputs)[0], want[0], 2e-4, 2e-4, "rows as saved before");
}

// A ResNet-50 layer (64 -> 64 channels, 56 x 56, He-scaled weights, ReLU outputs as
// inputs): the error of each algorithm against the ref target's direct convolution,
// printed for the record, within bounds that keep whole networks at rtol 1e-3.
TEST(cpu_winograd, accuracy_against_the_direct_convolution) {
    builder b;
    auto x = b.param("x", {1, 64, 56, 56});
    auto xs = b.inputs["x"];
    for (std::size_t i = 0; i < xs.get_shape().elements(); ++i) {
        auto* p = reinterpret_cast<float*>(xs.data()) + i;
        *p = std::fabs(*p);
    }
    auto w = b.constant({64, 64, 3, 3}, static_cast<float>(std::sqrt(2.0 / (9 * 64)) * 1.7));
    auto y = b.op("convolution", conv_attrs({1, 1, 1, 1}), {x, w, b.constant({64}, 0.1f)});
    b.ret({y});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    const auto want = ref.eval(b.inputs)[0].to_vector<double>();
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (const char* mode : {"0", "2", "4"}) {
        test::env_override sw("KILN_CPU_WINOGRAD", mode);
        program cpu = b.p;
        cpu.compile(*get_target("cpu"));
        EXPECT_EQ(count_ops(cpu, "cpu::winograd_conv"), std::string(mode) == "0" ? 0u : 1u);
        const auto got = cpu.eval(b.inputs)[0].to_vector<double>();
        double max_abs = 0, max_rel = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const double d = std::fabs(got[i] - want[i]);
            max_abs = std::max(max_abs, d);
            max_rel = std::max(max_rel, d / std::max(std::fabs(want[i]), 1e-2 * scale));
        }
        std::printf("[ accuracy ] %s: max |output| %.3g, max abs error %.3g, max rel error %.3g\n",
                    std::string(mode) == "0" ? "oneDNN direct" : (std::string(mode) == "2" ? "F(2x2,3x3)" : "F(4x4,3x3)"),
                    scale, max_abs, max_rel);
        EXPECT_LT(max_abs, 1e-4 * scale) << mode;
    }
}
