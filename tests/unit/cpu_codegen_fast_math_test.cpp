// fast_math's approximations of exp, sigmoid, tanh and erf: within 1e-5 relative error of
// the exact functions (computed in double) over dense ranges of inputs, wherever the
// result is a normal float; special values (NaN, infinities, overflow, underflow) as
// libm gives them. Checked twice: the helpers as compiled into Kiln (the interpreter's
// copy) and as compiled into generated kernels (vectorized, with contraction).
#include "cpu_codegen_util.hpp"

#include "targets/cpu/codegen/compiler.hpp"
#include "codegen/fast_math.hpp"

#include <cfloat>
#include <cmath>
#include <functional>
#include <limits>

namespace kiln::test::fast_math_copy {
KILN_CODEGEN_HELPERS
}  // namespace kiln::test::fast_math_copy

using namespace kiln;
using namespace kiln::test;
namespace fm = kiln::test::fast_math_copy;

namespace {

double exact_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Dense inputs over [lo, hi] plus tiny magnitudes near zero.
std::vector<float> dense(float lo, float hi, std::size_t n) {
    std::vector<float> v;
    v.reserve(n + 400);
    for (std::size_t i = 0; i < n; ++i)
        v.push_back(lo + (hi - lo) * static_cast<float>(static_cast<double>(i) / static_cast<double>(n - 1)));
    for (int e = -40; e <= 0; ++e)
        for (float m : {1.0f, 1.37f, 1.93f, -1.0f, -1.61f})
            if (std::ldexp(1.0, e) * std::fabs(m) <= std::max(std::fabs(lo), std::fabs(hi)))
                v.push_back(m * static_cast<float>(std::ldexp(1.0, e)));
    return v;
}

// Largest relative error over the inputs whose exact result is a normal float.
double max_rel_error(const std::vector<float>& x, const std::vector<float>& got, const std::function<double(double)>& f,
                     float* worst_at) {
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double want = f(x[i]);
        if (std::fabs(want) < FLT_MIN || std::fabs(want) > FLT_MAX) continue;
        const double e = std::fabs(got[i] - want) / std::fabs(want);
        if (e > worst) {
            worst = e;
            *worst_at = x[i];
        }
    }
    return worst;
}

struct case_t {
    const char* op;
    float lo, hi;
    std::function<float(float)> approx;
    std::function<double(double)> exact;
};

const std::vector<case_t>& cases() {
    static const std::vector<case_t> c = {
        {"exp", -87.3f, 88.7f, fm::kiln_fexp, [](double x) { return std::exp(x); }},
        {"sigmoid", -87.0f, 88.0f, fm::kiln_fsigmoid, exact_sigmoid},
        {"tanh", -20.0f, 20.0f, fm::kiln_ftanh, [](double x) { return std::tanh(x); }},
        {"erf", -6.0f, 6.0f, fm::kiln_ferf, [](double x) { return std::erf(x); }},
    };
    return c;
}

}  // namespace

TEST(cpu_codegen_fast_math, helpers_within_1e_5_relative) {
    for (const auto& c : cases()) {
        auto x = dense(c.lo, c.hi, 2'000'001);
        std::vector<float> y(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) y[i] = c.approx(x[i]);
        float at = 0;
        const double e = max_rel_error(x, y, c.exact, &at);
        EXPECT_LE(e, 1e-5) << c.op << " worst at " << at;
        std::printf("[ fast_math ] %-8s max relative error %.3g (at %g)\n", c.op, e, static_cast<double>(at));
    }
}

TEST(cpu_codegen_fast_math, helpers_special_values) {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
    EXPECT_TRUE(std::isnan(fm::kiln_fexp(nan)));
    EXPECT_EQ(fm::kiln_fexp(inf), inf);
    EXPECT_EQ(fm::kiln_fexp(-inf), 0.0f);
    EXPECT_EQ(fm::kiln_fexp(89.0f), inf);
    EXPECT_EQ(fm::kiln_fexp(88.7229f), std::exp(88.7229f));  // overflows in both
    EXPECT_EQ(fm::kiln_fexp(-104.0f), 0.0f);
    // Subnormal results: within a couple of units of the smallest subnormal.
    for (float x : {-88.0f, -95.5f, -100.0f, -103.0f})
        EXPECT_NEAR(fm::kiln_fexp(x), std::exp(x), 3 * std::numeric_limits<float>::denorm_min()) << x;
    for (auto f : {fm::kiln_fsigmoid, fm::kiln_ftanh, fm::kiln_ferf}) EXPECT_TRUE(std::isnan(f(nan)));
    EXPECT_EQ(fm::kiln_fsigmoid(inf), 1.0f);
    EXPECT_EQ(fm::kiln_fsigmoid(-inf), 0.0f);
    EXPECT_EQ(fm::kiln_ftanh(inf), 1.0f);
    EXPECT_EQ(fm::kiln_ftanh(-inf), -1.0f);
    EXPECT_EQ(fm::kiln_ferf(inf), 1.0f);
    EXPECT_EQ(fm::kiln_ferf(-inf), -1.0f);
    EXPECT_TRUE(std::signbit(fm::kiln_ftanh(-0.0f)));
    EXPECT_TRUE(std::signbit(fm::kiln_ferf(-0.0f)));
}

TEST(cpu_codegen_fast_math, generated_kernels_within_1e_5_relative) {
    if (!cpu::codegen::find_compiler(cpu::read_cpu_options({}))) GTEST_SKIP() << "no C++ compiler";
    scratch_cache cache;
    for (const auto& c : cases()) {
        auto x = dense(c.lo, c.hi, 1'000'001);
        const shape s(type::float32, {x.size()});
        program p;
        auto* m = p.get_main_module();
        auto in = m->add_parameter("x", s);
        m->add_return({add_op(*m, c.op, {in})});
        auto cpu = compiled(p, "cpu", true);
        for (auto& mode : kernel_modes(cpu)) EXPECT_EQ(mode, "compiled");
        auto y = cpu.eval({{"x", literal(s, x).get_argument()}})[0].to_vector<float>();
        float at = 0;
        const double e = max_rel_error(x, y, c.exact, &at);
        EXPECT_LE(e, 1e-5) << c.op << " worst at " << at;
        std::printf("[ fast_math ] generated %-8s max relative error %.3g (at %g)\n", c.op, e, static_cast<double>(at));
    }
}
