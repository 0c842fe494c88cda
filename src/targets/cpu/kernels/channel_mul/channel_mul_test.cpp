// Per-channel rescaling (squeeze-and-excitation's x * s) on the cpu target
// (cpu::channel_mul): results match the ref target for channel counts that are and are not
// multiples of the layout's block, s per image or broadcast over the batch, either operand
// order; KILN_CPU_CHANNEL_MUL=dnnl keeps oneDNN's binary.
#include "cpu_test_util.hpp"

#include <kiln/serialize.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

// conv 3x3 (its result in oneDNN's layout) -> global average pool -> sigmoid = s ->
// x * s (or s * x) -> relu.
builder squeeze_excite(std::size_t n, std::size_t c, std::size_t hw, bool s_first) {
    builder b;
    auto x = b.param("x", {n, c, hw, hw});
    auto w = b.constant({c, c, 3, 3}, 0.3f);
    auto y = b.op("convolution", value::object{{"padding", value(value::array{1, 1, 1, 1})}}, {x, w, b.constant({c})});
    auto s = b.op("sigmoid", {b.op("pooling", value::object{{"mode", value(0)}, {"global", value(true)}}, {y})});
    auto m = s_first ? b.op("mul", {s, y}) : b.op("mul", {y, s});
    b.ret({b.op("relu", {m})});
    return b;
}

}  // namespace

TEST(cpu_channel_mul, squeeze_excite_shapes) {
    for (std::size_t c : {8, 20, 32, 48})
        for (std::size_t n : {1, 3})
            for (bool s_first : {false, true}) {
                auto r = run_both(squeeze_excite(n, c, 9, s_first), 2e-4, 2e-4);
                EXPECT_EQ(count_ops(r.cpu, "cpu::channel_mul"), 1u) << "c " << c << " n " << n << "\n" << text(r.cpu);
                EXPECT_EQ(count_ops(r.cpu, "cpu::binary"), 0u) << text(r.cpu);
                EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
            }
}

TEST(cpu_channel_mul, switched_off) {
    test::env_override off("KILN_CPU_CHANNEL_MUL", "dnnl");
    auto r = run_both(squeeze_excite(2, 32, 9, false), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::channel_mul"), 0u) << text(r.cpu);
}

TEST(cpu_channel_mul, saved_program_loads_and_runs) {
    auto b = squeeze_excite(2, 20, 7, false);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    {
        test::env_override no_grouping("KILN_CPU_FUSION", "0");  // as run_both compiles
        cpu.compile(*get_target("cpu"));
    }
    ASSERT_EQ(count_ops(cpu, "cpu::channel_mul"), 1u);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::channel_mul"), 1u);
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], 2e-4, 2e-4);
}
