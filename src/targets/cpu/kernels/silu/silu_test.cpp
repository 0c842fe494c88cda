// SiLU (x * sigmoid(x)) on Kiln's own kernel (cpu::silu): the kernel against the exact
// function in double precision over the whole float range and at the special values;
// convolutions and a matmul with a big SiLU result get a cpu::silu (in place, in the
// convolution's blocked layout) and match the ref target; small results, fast_math off
// and KILN_CPU_SILU=dnnl keep oneDNN's post-op; a saved program loads and runs. A global
// average pooling of the SiLU's result (squeeze-and-excitation) is summed by the SiLU's own
// pass (cpu::silu_means): the summing kernels against the plain one, the pooled program
// against the ref target, KILN_CPU_SILU_MEANS=0 keeping the pooling's kernel; the
// excitation's cpu::channel_mul then scales the SiLU's result in place.
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/channel_mul/channel_mul.hpp"
#include "targets/cpu/kernels/silu/silu.hpp"

#include <kiln/serialize.hpp>

#include <cmath>
#include <limits>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

double silu_exact(double x) { return x / (1.0 + std::exp(-x)); }

// Every kernel this machine can run: the portable one, the AVX2 one and the AVX-512 one where
// present (run() falls back to the next one down, so every call is valid).
constexpr cpu::silu_kernels::kernels all_kernels[] = {
    cpu::silu_kernels::kernels::portable, cpu::silu_kernels::kernels::avx2, cpu::silu_kernels::kernels::best};
void check_values(const std::vector<float>& x) {
    for (auto portable : all_kernels) {
        std::vector<float> y(x.size());
        cpu::silu_kernels::run(x.data(), y.data(), x.size(), portable);
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double want = silu_exact(x[i]);
            if (std::isnan(x[i])) {
                EXPECT_TRUE(std::isnan(y[i])) << "kernels " << static_cast<int>(portable);
                continue;
            }
            if (std::isinf(want)) {
                EXPECT_EQ(y[i], want) << "kernels " << static_cast<int>(portable);
                continue;
            }
            // Where the exact result is a normal float (not where it underflows).
            if (std::fabs(want) < std::numeric_limits<float>::min()) continue;
            EXPECT_NEAR(y[i], want, 1e-5 * std::fabs(want)) << "x = " << x[i] << ", kernels " << static_cast<int>(portable);
        }
    }
}

// conv (result in oneDNN's blocked layout) -> sigmoid, mul -> add 1 (a consumer after it).
builder conv_silu(const std::vector<std::size_t>& x_lens, std::size_t out_channels, std::int64_t group = 1) {
    builder b;
    auto x = b.param("x", x_lens);
    const std::size_t in_per_group = x_lens[1] / static_cast<std::size_t>(group);
    auto w = b.constant({out_channels, in_per_group, 3, 3}, 0.3f);
    auto y = b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}, {"group", value(group)}},
                  {x, w, b.constant({out_channels})});
    auto s = b.op("sigmoid", {y});
    auto z = b.op("mul", {y, s});
    b.ret({b.op("add", {z, b.scalar(1.0f)})});
    return b;
}

// Squeeze-and-excitation's shape: conv -> SiLU -> global average pool -> 1x1 conv ->
// sigmoid, times the SiLU's result.
builder squeeze_excite(const std::vector<std::size_t>& x_lens, std::size_t c, bool return_silu = false) {
    builder b;
    auto x = b.param("x", x_lens);
    auto y = b.op("convolution", value::object{{"padding", arr({1, 1, 1, 1})}},
                  {x, b.constant({c, x_lens[1], 3, 3}, 0.3f), b.constant({c})});
    auto a = b.op("mul", {y, b.op("sigmoid", {y})});
    auto m = b.op("pooling", value::object{{"mode", value(0)}, {"global", value(true)}}, {a});
    auto e = b.op("sigmoid", {b.op("convolution", value::object{}, {m, b.constant({c, c, 1, 1}, 0.3f)})});
    auto y2 = b.op("mul", {a, e});
    if (return_silu) b.ret({y2, a});
    else b.ret({y2});
    return b;
}

}  // namespace

TEST(cpu_silu, summing_kernels_match_the_plain_one) {
    // Widths: a 16-channel block, an 8-channel one, channels-last counts below, at and past
    // the 64-column steps with and without a partial last vector.
    for (std::size_t width : {16u, 8u, 40u, 64u, 144u, 200u}) {
        const std::size_t rows = 37;
        std::vector<float> x(rows * width);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 1013) / 101.0f - 5.0f;
        for (auto k : all_kernels) {
            std::vector<float> want(x.size()), got(x.size(), -1.0f), sums(width, 0.5f);
            cpu::silu_kernels::run(x.data(), want.data(), x.size(), k);
            cpu::silu_kernels::run_summing(x.data(), got.data(), rows, width, sums.data(), k);
            for (std::size_t i = 0; i < x.size(); ++i)
                ASSERT_NEAR(got[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << "width " << width << " at " << i;
            for (std::size_t j = 0; j < width; ++j) {
                double s = 0.5;
                for (std::size_t r = 0; r < rows; ++r) s += want[r * width + j];
                EXPECT_NEAR(sums[j], s, 1e-4 * (1.0 + std::fabs(s))) << "width " << width << ", column " << j;
            }
        }
    }
}

TEST(cpu_silu, a_pooled_result_is_summed_by_the_silu) {
    // One 16-channel block's worth, channels that are not a multiple of 16, two images, and
    // enough pixels for the parts of a plane to be summed apart.
    for (auto [x_lens, c] : std::vector<std::pair<std::vector<std::size_t>, std::size_t>>{
             {{1, 16, 24, 24}, 32}, {{2, 12, 20, 18}, 40}, {{1, 8, 56, 56}, 24}}) {
        auto r = run_both(squeeze_excite(x_lens, c), 2e-4, 2e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::silu_means"), 1u) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::global_avg_pool"), 0u) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
        // The excitation scales the SiLU's result in place: the means' view does not read it.
        std::size_t in_place = 0;
        for (const auto& ins : *r.cpu.get_main_module())
            if (const auto* m = ins.get_operator().any_cast<cpu::channel_mul>()) in_place += m->in_place ? 1 : 0;
        EXPECT_EQ(in_place, 1u) << text(r.cpu);
    }
    // The SiLU's result is also a program output: the excitation writes a buffer of its own.
    {
        auto r = run_both(squeeze_excite({1, 16, 24, 24}, 32, true), 2e-4, 2e-5);
        for (const auto& ins : *r.cpu.get_main_module()) {
            if (const auto* m = ins.get_operator().any_cast<cpu::channel_mul>()) {
                EXPECT_FALSE(m->in_place) << text(r.cpu);
            }
        }
        EXPECT_EQ(count_ops(r.cpu, "cpu::channel_mul"), 1u) << text(r.cpu);
    }
    test::env_override off("KILN_CPU_SILU_MEANS", "0");
    auto r = run_both(squeeze_excite({2, 12, 20, 18}, 40), 2e-4, 2e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::silu_means"), 0u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::global_avg_pool"), 1u) << text(r.cpu);
}

TEST(cpu_silu, kernel_matches_exact_function) {
    std::vector<float> x;
    for (float v = -110.0f; v <= 110.0f; v += 0.0371f) x.push_back(v);
    for (float v = -1.0f; v <= 1.0f; v += 1.0f / 1024) x.push_back(v);
    for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, -87.0f, 88.0f, -88.0f, 88.7f, -87.3f, -92.0f, -103.9f, -104.1f,
                    1e30f, -1e30f, 3e38f, -3e38f})
        x.push_back(v);
    x.push_back(std::numeric_limits<float>::infinity());
    x.push_back(std::numeric_limits<float>::quiet_NaN());
    // Odd length: the vector loop's tail too.
    if (x.size() % 16 == 0) x.push_back(0.5f);
    check_values(x);
    // Fixed points: silu(0) = 0 (padding stays zero), silu(+inf) = +inf.
    std::vector<float> s{0.0f, std::numeric_limits<float>::infinity()}, y(2);
    cpu::silu_kernels::run(s.data(), y.data(), 2);
    EXPECT_EQ(y[0], 0.0f);
    EXPECT_EQ(y[1], std::numeric_limits<float>::infinity());
    // Far below the range where the result is a float: exactly -0, not a tiny product.
    for (auto portable : all_kernels) {
        std::vector<float> far(16, -1e30f), out(16, 1.0f);
        far[3] = -131.0f;
        far[15] = -3e38f;
        cpu::silu_kernels::run(far.data(), out.data(), far.size(), portable);
        for (float v : out) EXPECT_EQ(v, 0.0f) << "kernels " << static_cast<int>(portable);
    }
}

TEST(cpu_silu, kernel_is_within_1e6_above_minus_87) {
    std::vector<float> x;
    for (float v = -87.0f; v <= 40.0f; v += 0.00731f) x.push_back(v);
    for (auto portable : all_kernels) {
        std::vector<float> y(x.size());
        cpu::silu_kernels::run(x.data(), y.data(), x.size(), portable);
        double worst = 0;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const double want = silu_exact(x[i]);
            if (want != 0.0) worst = std::max(worst, std::fabs(y[i] - want) / std::fabs(want));
        }
        EXPECT_LT(worst, 1e-6) << "kernels " << static_cast<int>(portable);
    }
}

TEST(cpu_silu, big_convolution_results_use_the_kernel_in_place) {
    // 32 x 24 x 24 = 18432 values (>= silu_min_elements), dense and depthwise.
    for (std::int64_t group : {1, 32}) {
        auto r = run_both(conv_silu({1, 32, 24, 24}, 32, group), 2e-4, 2e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::silu"), 1u) << text(r.cpu);
        EXPECT_EQ(text(r.cpu).find("sigmoid"), std::string::npos) << text(r.cpu);
        EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
    }
    // Channels that are not a multiple of the block (zero padding in the layout), 2 images.
    auto r = run_both(conv_silu({2, 12, 30, 30}, 20), 2e-4, 2e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::silu"), 1u) << text(r.cpu);
}

TEST(cpu_silu, small_results_fast_math_off_and_switch_keep_the_post_op) {
    // 8 x 8 x 8 = 512 values: a post-op of the convolution.
    auto small = run_both(conv_silu({1, 8, 8, 8}, 8), 2e-4, 2e-5);
    EXPECT_EQ(count_ops(small.cpu, "cpu::silu"), 0u) << text(small.cpu);
    compile_options exact;
    exact.fast_math = false;
    auto off = run_both(conv_silu({1, 32, 24, 24}, 32), 2e-4, 2e-5, exact);
    EXPECT_EQ(count_ops(off.cpu, "cpu::silu"), 0u) << text(off.cpu);
    test::env_override dnnl("KILN_CPU_SILU", "dnnl");
    auto sw = run_both(conv_silu({1, 32, 24, 24}, 32), 2e-4, 2e-5);
    EXPECT_EQ(count_ops(sw.cpu, "cpu::silu"), 0u) << text(sw.cpu);
}

TEST(cpu_silu, matmul_result) {
    builder b;
    auto x = b.param("x", {96, 128});
    auto w = b.constant({128, 256}, 0.1f);
    auto y = b.op("matmul", {x, w});
    auto s = b.op("sigmoid", {y});
    b.ret({b.op("mul", {s, y})});  // the other operand order
    auto r = run_both(b, 2e-4, 2e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::silu"), 1u) << text(r.cpu);
}

// Compiles b for cpu (with `op` in it), saves, loads and runs it against the ref target.
static void check_saved(const builder& b, const std::string& op) {
    program ref = b.p;
    ref.compile(*get_target("ref"));
    program cpu = b.p;
    cpu.compile(*get_target("cpu"));
    ASSERT_EQ(count_ops(cpu, op), 1u) << text(cpu);
    const auto bytes = save_buffer(cpu);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(count_ops(loaded, op), 1u);
    auto got = loaded.eval(b.inputs);
    auto want = ref.eval(b.inputs);
    ASSERT_EQ(got.size(), 1u);
    expect_close(got[0], want[0], 2e-4, 2e-5);
}

TEST(cpu_silu, saved_program_loads_and_runs) { check_saved(conv_silu({1, 32, 24, 24}, 32), "cpu::silu"); }

TEST(cpu_silu, saved_program_with_means_loads_and_runs) {
    check_saved(squeeze_excite({2, 12, 20, 18}, 40), "cpu::silu_means");
}
