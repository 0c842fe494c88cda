// Max pooling of blocked activations on the cpu target (cpu::max_pool_blocked): results
// match the ref target for ResNet-50's 3x3/2 pool, uneven padding, ceil mode, dilation,
// channel counts that are not multiples of the block and several batches; a saved
// program loads and runs; KILN_CPU_MAX_POOL=dnnl keeps oneDNN's pooling.
#include "cpu_test_util.hpp"

#include <kiln/serialize.hpp>

#include <cstdlib>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

struct pool_case {
    std::vector<std::size_t> x;  // N, C, H, W of the convolution's input
    std::vector<std::int64_t> kernel{3, 3}, stride{2, 2}, pads{1, 1, 1, 1}, dilation{1, 1};
    bool ceil = false;
};

// conv 3x3 (its result is in oneDNN's blocked layout) -> max pool -> relu.
builder build(const pool_case& c) {
    builder b;
    auto x = b.param("x", c.x);
    auto w = b.constant({c.x[1], c.x[1], 3, 3}, 0.3f);
    auto y = b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}}, {x, w, b.constant({c.x[1]})});
    y = b.op("pooling",
             value::object{{"mode", value(1)},
                           {"lengths", arr(c.kernel)},
                           {"stride", arr(c.stride)},
                           {"padding", arr(c.pads)},
                           {"dilation", arr(c.dilation)},
                           {"ceil_mode", value(c.ceil)}},
             {y});
    b.ret({b.op("relu", {y})});
    return b;
}

// want 1: the pool must be Kiln's (=all: channels-last layouts, which AVX-512 machines get,
// are oneDNN's by default); 0: the switch set leaves it to oneDNN.
void check(const pool_case& c, std::size_t want = 1) {
    const char* set = std::getenv("KILN_CPU_MAX_POOL");
    const std::string mode = set ? set : "all";
    test::env_override all("KILN_CPU_MAX_POOL", want == 1 ? mode.c_str() : set ? mode.c_str() : nullptr);
    // The tolerance is the convolution's (Winograd for 64 channels); the pool itself is exact.
    auto r = run_both(build(c), 2e-4, 2e-4);
    EXPECT_EQ(count_ops(r.cpu, "cpu::max_pool_blocked"), want) << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

}  // namespace

TEST(cpu_max_pool_blocked, resnet_stem_pool) { check({{1, 64, 28, 28}}); }

TEST(cpu_max_pool_blocked, odd_sizes_uneven_padding_batches) {
    check({{2, 20, 13, 11}, {3, 3}, {2, 2}, {1, 0, 0, 1}});
    check({{3, 16, 9, 10}, {2, 2}, {2, 2}, {0, 0, 0, 0}});
    check({{1, 24, 12, 12}, {3, 3}, {1, 1}, {1, 1, 1, 1}});
    check({{1, 32, 11, 9}, {2, 3}, {1, 2}, {1, 2, 0, 1}});
}

TEST(cpu_max_pool_blocked, ceil_mode_and_dilation) {
    check({{2, 16, 14, 13}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true});
    check({{1, 24, 15, 15}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}});
}

TEST(cpu_max_pool_blocked, dnnl_switch) {
    test::env_override dnnl("KILN_CPU_MAX_POOL", "dnnl");
    check({{1, 64, 28, 28}}, 0);
}

TEST(cpu_max_pool_blocked, saved_program_loads_and_runs) {
    test::env_override all("KILN_CPU_MAX_POOL", "all");
    auto b = build({{2, 20, 13, 11}});
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, "cpu::max_pool_blocked"), 1u);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, "cpu::max_pool_blocked"), 1u);
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], 2e-4, 2e-4);
}
