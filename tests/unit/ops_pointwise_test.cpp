// Pointwise ops (src/ops/pointwise_*.hpp): each op on small odd-sized random non-zero
// data against a formula written out here in double, broadcasting and strided inputs
// against explicit index arithmetic, integer edge cases, and errors.
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"

#include <kiln/context.hpp>
#include <kiln/literal.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

using namespace kiln;

namespace {

std::vector<float> random_floats(std::size_t n, float lo, float hi, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) {
        do x = d(gen);
        while (x == 0.0f);
    }
    return v;
}

argument make_arg(type t, std::vector<std::size_t> lens, const std::vector<double>& values) {
    return literal(shape(t, std::move(lens)), values).get_argument();
}
argument make_float(std::vector<std::size_t> lens, const std::vector<float>& values) {
    return literal(shape(type::float32, std::move(lens)), values).get_argument();
}

argument run(const operation& op, const std::vector<argument>& args) {
    std::vector<shape> shapes;
    for (auto& a : args) shapes.push_back(a.get_shape());
    host_context ctx;
    auto out = op.compute_shape(shapes);
    return op.compute(ctx, out, args);
}

// Runs a float32 unary op over random data and compares with `expected` (computed in double).
void check_unary(const operation& op, float lo, float hi, const std::function<double(double)>& expected,
                 double rtol = 1e-5, double atol = 1e-6) {
    auto x = random_floats(3 * 5 * 7, lo, hi, 11);
    auto r = run(op, {make_float({3, 5, 7}, x)});
    ASSERT_EQ(r.get_shape(), shape(type::float32, {3, 5, 7})) << op.name();
    auto y = r.to_vector<double>();
    for (std::size_t i = 0; i < x.size(); ++i) {
        double e = expected(x[i]);
        EXPECT_NEAR(y[i], e, atol + rtol * std::fabs(e)) << op.name() << " at x = " << x[i];
    }
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double softplus(double x) { return std::log(1.0 + std::exp(x)); }

}  // namespace

TEST(ops_pointwise, math_functions_match_cmath) {
    check_unary(op::exp_op{}, -3, 3, [](double x) { return std::exp(x); });
    check_unary(op::log_op{}, 0.1f, 9, [](double x) { return std::log(x); });
    check_unary(op::sqrt_op{}, 0.1f, 9, [](double x) { return std::sqrt(x); });
    check_unary(op::reciprocal_op{}, 0.5f, 4, [](double x) { return 1 / x; });
    check_unary(op::sin_op{}, -3, 3, [](double x) { return std::sin(x); });
    check_unary(op::cos_op{}, -3, 3, [](double x) { return std::cos(x); });
    check_unary(op::tan_op{}, -1, 1, [](double x) { return std::tan(x); });
    check_unary(op::asin_op{}, -0.9f, 0.9f, [](double x) { return std::asin(x); });
    check_unary(op::acos_op{}, -0.9f, 0.9f, [](double x) { return std::acos(x); });
    check_unary(op::atan_op{}, -3, 3, [](double x) { return std::atan(x); });
    check_unary(op::sinh_op{}, -3, 3, [](double x) { return std::sinh(x); });
    check_unary(op::cosh_op{}, -3, 3, [](double x) { return std::cosh(x); });
    check_unary(op::asinh_op{}, -3, 3, [](double x) { return std::asinh(x); });
    check_unary(op::acosh_op{}, 1.1f, 5, [](double x) { return std::acosh(x); });
    check_unary(op::atanh_op{}, -0.9f, 0.9f, [](double x) { return std::atanh(x); });
    check_unary(op::tanh_op{}, -3, 3, [](double x) { return std::tanh(x); });
    check_unary(op::erf_op{}, -2, 2, [](double x) { return std::erf(x); });
    check_unary(op::abs_op{}, -3, 3, [](double x) { return std::fabs(x); });
    check_unary(op::neg_op{}, -3, 3, [](double x) { return -x; });
    check_unary(op::floor_op{}, -9, 9, [](double x) { return std::floor(x); });
    check_unary(op::ceil_op{}, -9, 9, [](double x) { return std::ceil(x); });
    check_unary(op::sign_op{}, -3, 3, [](double x) { return x > 0 ? 1.0 : -1.0; });
}

TEST(ops_pointwise, activations_match_their_formulas) {
    check_unary(op::sigmoid_op{}, -20, 20, sigmoid);
    check_unary(op::relu_op{}, -3, 3, [](double x) { return x > 0 ? x : 0; });
    check_unary(op::softplus_op{}, -20, 20, softplus);
    check_unary(op::softsign_op{}, -5, 5, [](double x) { return x / (1 + std::fabs(x)); });
    check_unary(op::hard_swish_op{}, -5, 5, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); });
    check_unary(op::mish_op{}, -5, 5, [](double x) { return x * std::tanh(softplus(x)); });
    op::leaky_relu_op lr;
    lr.alpha = 0.3f;
    check_unary(lr, -3, 3, [](double x) { return x < 0 ? 0.3 * x : x; });
    op::elu_op elu;
    elu.alpha = 1.5f;
    check_unary(elu, -3, 3, [](double x) { return x < 0 ? 1.5 * (std::exp(x) - 1) : x; });
    op::selu_op selu;
    selu.alpha = 2.0f;
    selu.gamma = 3.0f;
    check_unary(selu, -3, 3, [](double x) { return x < 0 ? 3 * (2 * std::exp(x) - 2) : 3 * x; });
    op::celu_op celu;
    celu.alpha = 2.0f;
    check_unary(celu, -3, 3, [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * (std::exp(x / 2) - 1)); });
    op::hard_sigmoid_op hs;
    hs.alpha = 0.3f;
    hs.beta = 0.4f;
    check_unary(hs, -5, 5, [](double x) { return std::max(0.0, std::min(1.0, 0.3 * x + 0.4)); });
    op::thresholded_relu_op tr;
    tr.alpha = 0.5f;
    check_unary(tr, -3, 3, [](double x) { return x > 0.5 ? x : 0; });
    op::gelu_op gelu;
    check_unary(gelu, -4, 4, [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); });
    gelu.approximate = "tanh";
    check_unary(gelu, -4, 4, [](double x) {
        return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    });
    op::swish_op swish;
    swish.alpha = 0.7f;
    check_unary(swish, -5, 5, [](double x) { return x * sigmoid(0.7 * x); });
    op::shrink_op shrink;
    shrink.bias = 0.25f;
    shrink.lambd = 1.0f;
    check_unary(shrink, -3, 3, [](double x) { return x < -1 ? x + 0.25 : x > 1 ? x - 0.25 : 0; });
}

TEST(ops_pointwise, round_is_half_to_even) {
    auto r = run(op::round_op{}, {make_float({7}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f})});
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{0, 2, 2, -0.0f, -2, 2, -3}));
}

TEST(ops_pointwise, binary_broadcasts_like_numpy) {
    auto a = random_floats(3 * 1 * 5, -4, 4, 1);
    auto b = random_floats(4 * 1, -4, 4, 2);
    auto r = run(op::sub_op{}, {make_float({3, 1, 5}, a), make_float({4, 1}, b)});
    ASSERT_EQ(r.get_shape(), shape(type::float32, {3, 4, 5}));
    auto y = r.to_vector<float>();
    for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t j = 0; j < 4; ++j)
            for (std::size_t k = 0; k < 5; ++k) EXPECT_EQ(y[(i * 4 + j) * 5 + k], a[i * 5 + k] - b[j]);
}

TEST(ops_pointwise, strided_inputs_are_read_through_their_strides) {
    // A 3x5 view of a 5x3 buffer (a transpose) plus a scalar.
    auto data = random_floats(15, -4, 4, 3);
    argument base = make_float({5, 3}, data);
    argument t = base.reshape(shape(type::float32, {3, 5}, {1, 3}));
    auto r = run(op::mul_op{}, {t, make_float({}, {2.5f})});
    ASSERT_TRUE(r.get_shape().standard());
    auto y = r.to_vector<float>();
    for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t j = 0; j < 5; ++j) EXPECT_EQ(y[i * 5 + j], data[j * 3 + i] * 2.5f);
}

TEST(ops_pointwise, float16_computes_in_float_and_rounds_once) {
    auto a = random_floats(9, -4, 4, 4);
    auto b = random_floats(9, -4, 4, 5);
    std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end());
    auto ha = make_arg(type::float16, {9}, ad), hb = make_arg(type::float16, {9}, bd);
    auto r = run(op::div_op{}, {ha, hb});
    ASSERT_EQ(r.get_shape().get_type(), type::float16);
    auto qa = ha.to_vector<float>(), qb = hb.to_vector<float>();
    auto y = r.to_vector<float>();
    for (std::size_t i = 0; i < 9; ++i) EXPECT_EQ(y[i], static_cast<float>(half(qa[i] / qb[i])));
}

TEST(ops_pointwise, integer_arithmetic_wraps_and_never_traps) {
    auto a = make_arg(type::int8, {6}, {100, -128, 7, -7, 7, -7});
    auto b = make_arg(type::int8, {6}, {100, -1, 2, 2, 0, -2});
    EXPECT_EQ(run(op::add_op{}, {a, b}).to_vector<int>(), (std::vector<int>{-56, 127, 9, -5, 7, -9}));
    EXPECT_EQ(run(op::mul_op{}, {a, b}).to_vector<int>(), (std::vector<int>{16, -128, 14, -14, 0, 14}));
    // Division truncates toward zero; by zero gives 0; -128 / -1 wraps.
    EXPECT_EQ(run(op::div_op{}, {a, b}).to_vector<int>(), (std::vector<int>{1, -128, 3, -3, 0, 3}));
    auto u = make_arg(type::uint16, {2}, {65535, 300});
    EXPECT_EQ(run(op::mul_op{}, {u, u}).to_vector<int>(), (std::vector<int>{1, 24464}));
}

TEST(ops_pointwise, mod_follows_the_divisor_or_the_dividend) {
    auto a = make_arg(type::int32, {5}, {-4, 7, -3, 5, 9});
    auto b = make_arg(type::int32, {5}, {3, -3, 2, 0, 4});
    op::mod_op m;
    EXPECT_EQ(run(m, {a, b}).to_vector<int>(), (std::vector<int>{2, -2, 1, 0, 1}));
    m.fmod = true;
    EXPECT_EQ(run(m, {a, b}).to_vector<int>(), (std::vector<int>{-1, 1, -1, 0, 1}));
    auto fa = make_float({3}, {-4.5f, 7.25f, 5.0f}), fb = make_float({3}, {3.0f, -3.0f, 2.0f});
    EXPECT_EQ(run(m, {fa, fb}).to_vector<float>(), (std::vector<float>{std::fmod(-4.5f, 3.0f), std::fmod(7.25f, -3.0f), 1.0f}));
}

TEST(ops_pointwise, pow_takes_an_exponent_of_another_type) {
    auto x = make_float({4}, {2.0f, 1.5f, -2.0f, 9.0f});
    auto e = make_arg(type::int64, {4}, {3, 2, 3, 0});
    auto r = run(op::pow_op{}, {x, e});
    ASSERT_EQ(r.get_shape().get_type(), type::float32);
    EXPECT_EQ(r.to_vector<float>(), (std::vector<float>{8.0f, 2.25f, -8.0f, 1.0f}));
    auto xi = make_arg(type::int32, {3}, {3, -2, 5});
    auto ef = make_float({3}, {2.0f, 3.0f, 0.5f});
    EXPECT_EQ(run(op::pow_op{}, {xi, ef}).to_vector<int>(), (std::vector<int>{9, -8, 2}));
    auto ei = make_arg(type::int32, {3}, {4, 5, 0});
    EXPECT_EQ(run(op::pow_op{}, {xi, ei}).to_vector<int>(), (std::vector<int>{81, -32, 1}));
}

TEST(ops_pointwise, min_max_propagate_nan) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    auto a = make_float({3}, {1.0f, nan, 3.0f}), b = make_float({3}, {2.0f, 0.0f, nan});
    auto mx = run(op::max_op{}, {a, b}).to_vector<float>();
    auto mn = run(op::min_op{}, {a, b}).to_vector<float>();
    EXPECT_EQ(mx[0], 2.0f);
    EXPECT_EQ(mn[0], 1.0f);
    EXPECT_TRUE(std::isnan(mx[1]) && std::isnan(mx[2]) && std::isnan(mn[1]) && std::isnan(mn[2]));
}

TEST(ops_pointwise, logic_bits_and_shifts) {
    auto p = make_arg(type::bool_, {4}, {1, 1, 0, 0}), q = make_arg(type::bool_, {4}, {1, 0, 1, 0});
    EXPECT_EQ(run(op::logical_and_op{}, {p, q}).to_vector<int>(), (std::vector<int>{1, 0, 0, 0}));
    EXPECT_EQ(run(op::logical_or_op{}, {p, q}).to_vector<int>(), (std::vector<int>{1, 1, 1, 0}));
    EXPECT_EQ(run(op::logical_xor_op{}, {p, q}).to_vector<int>(), (std::vector<int>{0, 1, 1, 0}));
    EXPECT_EQ(run(op::logical_not_op{}, {p}).to_vector<int>(), (std::vector<int>{0, 0, 1, 1}));
    auto a = make_arg(type::uint8, {4}, {0xF0, 0x0F, 0xAA, 1}), b = make_arg(type::uint8, {4}, {0x3C, 0x3C, 0xFF, 9});
    EXPECT_EQ(run(op::bitwise_and_op{}, {a, b}).to_vector<int>(), (std::vector<int>{0x30, 0x0C, 0xAA, 1}));
    EXPECT_EQ(run(op::bitwise_or_op{}, {a, b}).to_vector<int>(), (std::vector<int>{0xFC, 0x3F, 0xFF, 9}));
    EXPECT_EQ(run(op::bitwise_xor_op{}, {a, b}).to_vector<int>(), (std::vector<int>{0xCC, 0x33, 0x55, 8}));
    EXPECT_EQ(run(op::bitwise_not_op{}, {a}).to_vector<int>(), (std::vector<int>{0x0F, 0xF0, 0x55, 0xFE}));
    auto s = make_arg(type::uint8, {4}, {1, 2, 3, 8});
    op::bit_shift_op sh;
    EXPECT_EQ(run(sh, {a, s}).to_vector<int>(), (std::vector<int>{0xE0, 0x3C, 0x50, 0}));
    sh.direction = "right";
    EXPECT_EQ(run(sh, {a, s}).to_vector<int>(), (std::vector<int>{0x78, 0x03, 0x15, 0}));
}

TEST(ops_pointwise, comparisons_give_bool) {
    auto a = make_arg(type::int16, {2, 3}, {1, 5, -3, 4, 4, 0});
    auto b = make_arg(type::int16, {3}, {1, 4, 2});
    auto eq = run(op::equal_op{}, {a, b});
    EXPECT_EQ(eq.get_shape(), shape(type::bool_, {2, 3}));
    EXPECT_EQ(eq.to_vector<int>(), (std::vector<int>{1, 0, 0, 0, 1, 0}));
    EXPECT_EQ(run(op::less_op{}, {a, b}).to_vector<int>(), (std::vector<int>{0, 0, 1, 0, 0, 1}));
    EXPECT_EQ(run(op::greater_op{}, {a, b}).to_vector<int>(), (std::vector<int>{0, 1, 0, 1, 0, 0}));
    EXPECT_EQ(run(op::less_or_equal_op{}, {a, b}).to_vector<int>(), (std::vector<int>{1, 0, 1, 0, 1, 1}));
    EXPECT_EQ(run(op::greater_or_equal_op{}, {a, b}).to_vector<int>(), (std::vector<int>{1, 1, 0, 1, 1, 0}));
    auto s1 = literal(shape(type::string, {3}), std::vector<std::string>{"a", "bc", ""}).get_argument();
    auto s2 = literal(shape(type::string), std::vector<std::string>{"bc"}).get_argument();
    EXPECT_EQ(run(op::equal_op{}, {s1, s2}).to_vector<int>(), (std::vector<int>{0, 1, 0}));
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    auto f = make_float({4}, {inf, -inf, nan, 1.0f});
    EXPECT_EQ(run(op::isnan_op{}, {f}).to_vector<int>(), (std::vector<int>{0, 0, 1, 0}));
    op::isinf_op ii;
    EXPECT_EQ(run(ii, {f}).to_vector<int>(), (std::vector<int>{1, 1, 0, 0}));
    ii.detect_positive = false;
    EXPECT_EQ(run(ii, {f}).to_vector<int>(), (std::vector<int>{0, 1, 0, 0}));
}

TEST(ops_pointwise, where_and_clip) {
    auto c = make_arg(type::bool_, {2, 1}, {1, 0});
    auto x = literal(shape(type::string, {3}), std::vector<std::string>{"x0", "x1", "x2"}).get_argument();
    auto y = literal(shape(type::string), std::vector<std::string>{"y"}).get_argument();
    auto w = run(op::where_op{}, {c, x, y});
    EXPECT_EQ(w.get_shape(), shape(type::string, {2, 3}));
    EXPECT_EQ(w.to_vector<std::string>(), (std::vector<std::string>{"x0", "x1", "x2", "y", "y", "y"}));
    auto v = make_arg(type::int8, {5}, {-100, -3, 0, 3, 100});
    auto lo = make_arg(type::int8, {}, {-5}), hi = make_arg(type::int8, {}, {5});
    EXPECT_EQ(run(op::clip_op{}, {v, lo, hi}).to_vector<int>(), (std::vector<int>{-5, -3, 0, 3, 5}));
    // min > max: everything becomes max.
    EXPECT_EQ(run(op::clip_op{}, {v, hi, lo}).to_vector<int>(), (std::vector<int>(5, -5)));
    // where copies elements as stored: an fp8 NaN keeps its payload.
    argument f8(shape(type::float8e5m2, {2}));
    f8.data_as<fp8e5m2>()[0] = fp8e5m2::from_bits(0x7E);
    f8.data_as<fp8e5m2>()[1] = fp8e5m2::from_bits(0x81);
    auto picked = run(op::where_op{}, {make_arg(type::bool_, {}, {1}), f8, f8});
    EXPECT_EQ(picked.data_as<fp8e5m2>()[0].bits, 0x7E);
    EXPECT_EQ(picked.data_as<fp8e5m2>()[1].bits, 0x81);
}

TEST(ops_pointwise, prelu_and_swiglu) {
    auto x = random_floats(2 * 3 * 4, -3, 3, 6);
    auto slope = random_floats(4, 0.1f, 0.9f, 7);
    auto r = run(op::prelu_op{}, {make_float({2, 3, 4}, x), make_float({4}, slope)}).to_vector<float>();
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_EQ(r[i], x[i] > 0 ? x[i] : x[i] * slope[i % 4]);
    auto a = random_floats(15, -3, 3, 8), b = random_floats(15, -3, 3, 9);
    op::swiglu_op sw;
    sw.alpha = 1.7f;
    auto s = run(sw, {make_float({3, 5}, a), make_float({3, 5}, b)}).to_vector<float>();
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(s[i], a[i] * sigmoid(1.7 * a[i]) * b[i], 1e-5);
    // swiglu does not broadcast.
    EXPECT_THROW(run(sw, {make_float({3, 5}, a), make_float({5}, slope)}), error);
}

TEST(ops_pointwise, traits_names_and_attributes) {
    operation add = op::add_op{};
    EXPECT_EQ(add.name(), "add");
    EXPECT_TRUE(add.traits().pointwise);
    EXPECT_TRUE(add.traits().commutative);
    EXPECT_FALSE(operation(op::sub_op{}).traits().commutative);
    op::leaky_relu_op lr;
    lr.alpha = 0.25f;
    operation a = lr;
    EXPECT_EQ(a.to_string(), "leaky_relu{alpha=0.25}");
    EXPECT_EQ(make_op("leaky_relu", {{"alpha", 0.25}}), a);
    EXPECT_EQ(a.get<op::leaky_relu_op>().apply(-2.0f), -0.5f);
    for (const auto* n : {"relu", "sigmoid", "where", "clip", "equal", "pow", "gelu", "swiglu", "isinf"})
        EXPECT_TRUE(make_op(n).traits().pointwise) << n;
}

TEST(ops_pointwise, bad_inputs_are_kiln_errors) {
    auto f = make_float({2, 3}, {1, 2, 3, 4, 5, 6});
    auto g = make_float({4}, {1, 2, 3, 4});
    auto i = make_arg(type::int32, {2, 3}, {1, 2, 3, 4, 5, 6});
    auto expect_code = [](const std::function<void()>& fn, error_code code, const std::string& word) {
        try {
            fn();
            ADD_FAILURE() << "no error";
        } catch (const error& e) {
            EXPECT_EQ(e.code(), code) << e.what();
            EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
        }
    };
    expect_code([&] { run(op::add_op{}, {f, g}); }, error_code::shape, "add");
    expect_code([&] { run(op::add_op{}, {f, i}); }, error_code::type, "int32");
    expect_code([&] { run(op::sin_op{}, {i}); }, error_code::type, "sin");
    expect_code([&] { run(op::add_op{}, {f}); }, error_code::shape, "expected 2 inputs");
    expect_code([&] { run(op::where_op{}, {f, f, f}); }, error_code::type, "bool");
    expect_code([&] { run(op::logical_and_op{}, {f, f}); }, error_code::type, "logical_and");
}
