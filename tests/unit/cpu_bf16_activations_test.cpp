// cpu::keep_bf16_activations (bf16_activations.hpp) with a max pooling between bf16
// convolutions, as ResNet's stem has: where the CPU has native bf16 the stem writes bf16,
// the pooling pools bf16 and the convolutions after it read that as their source; and the
// numbers are exactly those of float32 activations (the second convolution rounding its
// float32 source to bf16 itself), since rounding to bf16 is monotonic: the max of rounded
// values is the rounded max.
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"

#include <kiln/quantization.hpp>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value conv_attrs(std::int64_t pad, std::int64_t stride = 1) {
    return value::object{{"padding", value(value::array{pad, pad, pad, pad})},
                         {"stride", value(value::array{stride, stride})},
                         {"group", value(1)}};
}

// x [2, 16, 24, 24]: relu(conv3x3 16->64 stride 2), max pool 3x3 stride 2 pad 1, then two
// 1x1 convolutions 64->64 reading the pool (a bottleneck and its projection), both
// outputs (so nothing after the pool is bf16 in either program).
builder stem() {
    builder b;
    auto x = b.param("x", {2, 16, 24, 24});
    auto c = b.op("relu", {b.op("convolution", conv_attrs(1, 2), {x, b.constant({64, 16, 3, 3}, 0.2f), b.constant({64})})});
    auto p = b.op("pooling",
                  value::object{{"mode", value(1)},
                                {"lengths", value(value::array{3, 3})},
                                {"stride", value(value::array{2, 2})},
                                {"padding", value(value::array{1, 1, 1, 1})}},
                  {c});
    auto a = b.op("convolution", conv_attrs(0), {p, b.constant({64, 64, 1, 1}, 0.1f), b.constant({64})});
    auto d = b.op("convolution", conv_attrs(0), {p, b.constant({64, 64, 1, 1}, 0.1f)});
    b.ret({a, d});
    return b;
}

std::vector<argument> run_bf16(const builder& b, bool keep_bf16, program* compiled) {
    program p = b.p;
    quantize_bf16(p);
    {
        test::env_override act("KILN_CPU_BF16_ACTIVATIONS", keep_bf16 ? "1" : "0");
        p.compile(*get_target("cpu"));
    }
    if (compiled) *compiled = p;
    return p.eval(b.inputs);
}

}  // namespace

TEST(cpu_bf16_activations, a_max_pool_between_bf16_convolutions_pools_bf16_exactly) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling", "relu", "add");
    if (!cpu::has_native_bf16()) GTEST_SKIP() << "no native bf16 on this CPU: activations stay float32";
    const auto b = stem();
    program kept;
    const auto got = run_bf16(b, true, &kept);
    const auto want = run_bf16(b, false, nullptr);
    std::size_t bf16_pools = 0;
    for (const auto& ins : *kept.get_main_module())
        if (ins.name() == "cpu::pooling" && ins.get_shape().get_type() == type::bfloat16) ++bf16_pools;
    EXPECT_EQ(bf16_pools, 1u) << text(kept);
    ASSERT_EQ(got.size(), 2u);
    for (std::size_t k = 0; k < 2; ++k) {
        const auto g = got[k].to_vector<float>(), w = want[k].to_vector<float>();
        ASSERT_EQ(g.size(), w.size());
        for (std::size_t i = 0; i < g.size(); ++i)
            ASSERT_EQ(g[i], w[i]) << "output " << k << " element " << i << "\n" << text(kept);
    }
}
