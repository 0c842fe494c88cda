// split_batch on the cpu target: a batched CNN whose early tensors outgrow the caches runs
// its first layers image by image (oneDNN primitives for batch 1, the weights stored
// once), the per-image results joined by cpu::concat_plain's block copies in their oneDNN
// layout; results match the ref target, with and without the pass, and after a save and
// load.
#include "cpu_test_util.hpp"

#include <kiln/serialize.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

// x[n, 3, 112, 112] -> conv 3x3 (32 ch: 1.6 MB per image) -> relu -> max pool 3x3/2 ->
// conv 1x1 (64) + a 3x3 branch -> relu -> conv 3x3/8 (7x7: few pixels) -> global average
// pool.
builder cnn(std::size_t n) {
    builder b;
    auto x = b.param("x", {n, 3, 112, 112});
    auto conv = [&](instruction_ref in, std::size_t ci, std::size_t co, std::int64_t k, std::int64_t s) {
        const std::int64_t p = k / 2;
        return b.op("convolution", {{"padding", arr({p, p, p, p})}, {"stride", arr({s, s})}},
                    {in, b.constant({co, ci, static_cast<std::size_t>(k), static_cast<std::size_t>(k)}, 0.3f),
                     b.constant({co}, 0.1f)});
    };
    auto a = b.op("relu", {conv(x, 3, 32, 3, 1)});
    auto pool = b.op("pooling", {{"mode", value(std::int64_t{1})}, {"lengths", arr({3, 3})}, {"stride", arr({2, 2})},
                                 {"padding", arr({1, 1, 1, 1})}, {"dilation", arr({1, 1})}},
                     {a});
    auto sum = b.op("relu", {b.op("add", {conv(pool, 32, 64, 1, 1), conv(pool, 32, 64, 3, 1)})});
    auto late = b.op("relu", {conv(sum, 64, 64, 3, 8)});
    b.ret({b.op("pooling", {{"mode", value(std::int64_t{0})}, {"global", value(true)}}, {late})});
    return b;
}

}  // namespace

// Automatic is on with AVX-512 only (cpu_options): these tests force it on.
TEST(cpu_split_batch, early_layers_run_image_by_image) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling");
    test::env_override on("KILN_CPU_SPLIT_BATCH", "1");
    for (std::size_t n : {2u, 3u}) {
        auto b = cnn(n);
        auto r = run_both(b, 2e-4, 2e-4);
        EXPECT_EQ(count_ops(r.cpu, "slice"), n) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::concat_plain"), 1u) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        // One stored copy of each weight however many images: the program's literals
        // are no more than the unsplit program's.
        program whole = b.p;
        {
            test::env_override off("KILN_CPU_SPLIT_BATCH", "0");
            test::env_override no_grouping("KILN_CPU_FUSION", "0");
            whole.compile(*get_target("cpu"));
        }
        EXPECT_EQ(count_ops(whole, "slice"), 0u);
        EXPECT_LE(count_ops(r.cpu, "@literal"), count_ops(whole, "@literal")) << text(r.cpu);
        expect_close(whole.eval(b.inputs)[0], r.ref_out[0], 2e-4, 2e-4);
    }
}

TEST(cpu_split_batch, saved_program_loads_and_runs) {
    test::env_override on("KILN_CPU_SPLIT_BATCH", "1");
    auto b = cnn(2);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "slice"), 2u);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    expect_close(loaded.eval(b.inputs)[0], ref.eval(b.inputs)[0], 2e-4, 2e-4);
}
