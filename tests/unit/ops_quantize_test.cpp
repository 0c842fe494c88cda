// quantize_linear, dequantize_linear, dynamic_quantize_linear and dropout.
#include "ops/dropout.hpp"
#include "ops/mt19937.hpp"
#include "ops/quantize.hpp"

#include <kiln/context.hpp>
#include <kiln/literal.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

argument run(const operation& op, const std::vector<argument>& args) {
    std::vector<shape> shapes;
    for (auto& a : args) shapes.push_back(a.get_shape());
    host_context ctx;
    return op.compute(ctx, op.compute_shape(shapes), args);
}

template <class T>
argument make(type t, std::vector<std::size_t> lens, const std::vector<T>& v) {
    return literal(shape(t, std::move(lens)), v).get_argument();
}

std::vector<float> random_floats(std::size_t n, float lo, float hi, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
}

// Independent per-element quantization: round half to even, add, clamp.
int quantize_ref(float x, float scale, int zp, int lo, int hi) {
    double q = static_cast<double>(x / scale);
    double r = std::floor(q);
    double frac = q - r;
    if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
    return static_cast<int>(std::min<double>(std::max<double>(r + zp, lo), hi));
}

}  // namespace

TEST(ops_quantize, per_tensor_uint8_rounds_half_to_even_and_saturates) {
    auto x = make(type::float32, {7}, std::vector<float>{0.0f, 2.0f, 3.0f, 5.0f, -2.0f, 1000.0f, -1000.0f});
    auto s = make(type::float32, {}, std::vector<float>{2.0f});
    auto z = make(type::uint8, {}, std::vector<int>{128});
    auto y = run(op::quantize_linear_op{}, {x, s, z});
    EXPECT_EQ(y.get_shape(), shape(type::uint8, {7}));
    // 1 -> 129, 1.5 -> 2 -> 130, 2.5 -> 2 -> 130, -1 -> 127.
    EXPECT_EQ(y.to_vector<int>(), (std::vector<int>{128, 129, 130, 130, 127, 255, 0}));
}

TEST(ops_quantize, per_axis_and_blocked_scales) {
    const std::size_t rows = 3, cols = 5;
    auto xv = random_floats(rows * cols, -20, 20, 1);
    auto x = make(type::float32, {rows, cols}, xv);
    std::vector<float> sv{0.5f, 0.25f, 1.5f};
    std::vector<int> zv{-3, 0, 4};
    op::quantize_linear_op q;
    q.axis = 0;
    auto y = run(q, {x, make(type::float32, {rows}, sv), make(type::int8, {rows}, zv)}).to_vector<int>();
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
            EXPECT_EQ(y[r * cols + c], quantize_ref(xv[r * cols + c], sv[r], zv[r], -128, 127));
    // Blocks of 2 along axis 1: ceil(5 / 2) = 3 scales per row, the last block short.
    auto bs = random_floats(rows * 3, 0.1f, 2.0f, 2);
    q.axis = 1;
    q.block_size = 2;
    q.output_type = type::int4;
    auto yb = run(q, {x, make(type::float32, {rows, 3}, bs)});
    EXPECT_EQ(yb.get_shape(), shape(type::int4, {rows, cols}));
    auto ybv = yb.to_vector<int>();
    for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t c = 0; c < cols; ++c)
            EXPECT_EQ(ybv[r * cols + c], quantize_ref(xv[r * cols + c], bs[r * 3 + c / 2], 0, -8, 7));
    // A scale of the wrong shape is a shape error naming the op.
    try {
        run(q, {x, make(type::float32, {rows, 2}, std::vector<float>(6, 1.0f))});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(std::string(e.what()).find("quantize_linear"), std::string::npos);
    }
}

TEST(ops_quantize, fp8_output_saturates) {
    auto x = make(type::float32, {3}, std::vector<float>{1.0f, 1000.0f, -3.1f});
    auto s = make(type::float32, {}, std::vector<float>{0.5f});
    op::quantize_linear_op q;
    q.output_type = type::float8e4m3fn;
    auto y = run(q, {x, s}).to_vector<float>();
    EXPECT_EQ(y[0], 2.0f);
    EXPECT_EQ(y[1], 448.0f);
    EXPECT_EQ(y[2], static_cast<float>(fp8e4m3fn(-6.2f)));
    q.saturate = false;
    EXPECT_TRUE(std::isnan(run(q, {x, s}).to_vector<float>()[1]));
}

TEST(ops_quantize, dequantize_per_tensor_axis_and_types) {
    auto x = make(type::int8, {2, 3}, std::vector<int>{-128, -1, 0, 5, 100, 127});
    auto s = make(type::float32, {3}, std::vector<float>{0.5f, 0.25f, 2.0f});
    auto z = make(type::int8, {3}, std::vector<int>{1, -2, 3});
    op::dequantize_linear_op d;
    auto y = run(d, {x, s, z});
    EXPECT_EQ(y.get_shape(), shape(type::float32, {2, 3}));
    EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{-64.5f, 0.25f, -6.0f, 2.0f, 25.5f, 248.0f}));
    // Output type follows a float16 scale unless output_type says otherwise.
    auto hs = make(type::float16, {}, std::vector<float>{0.5f});
    auto yh = run(d, {x, hs});
    EXPECT_EQ(yh.get_shape().get_type(), type::float16);
    EXPECT_EQ(yh.to_vector<float>(), (std::vector<float>{-64.0f, -0.5f, 0.0f, 2.5f, 50.0f, 63.5f}));
    d.output_type = type::float32;
    EXPECT_EQ(run(d, {x, hs}).get_shape().get_type(), type::float32);
    // A zero point of another type is a type error.
    EXPECT_THROW(run(d, {x, s, make(type::uint8, {3}, std::vector<int>{0, 0, 0})}), error);
}

TEST(ops_quantize, round_trip_int4_blocked) {
    auto x = make(type::int4, {2, 4}, std::vector<int>{-8, -1, 0, 7, 3, -3, 6, -6});
    auto s = make(type::float32, {2, 2}, std::vector<float>{1.0f, 0.5f, 2.0f, 0.25f});
    op::dequantize_linear_op d;
    d.block_size = 2;
    auto y = run(d, {x, s}).to_vector<float>();
    EXPECT_EQ(y, (std::vector<float>{-8.0f, -1.0f, 0.0f, 3.5f, 6.0f, -6.0f, 1.5f, -1.5f}));
    op::quantize_linear_op q;
    q.block_size = 2;
    q.output_type = type::int4;
    EXPECT_EQ(run(q, {make(type::float32, {2, 4}, y), s}), x);
}

TEST(ops_quantize, dynamic_quantize_linear) {
    auto xv = random_floats(11, -3, 5, 4);
    auto r = run(op::dynamic_quantize_linear_op{}, {make(type::float32, {11}, xv)});
    ASSERT_EQ(r.elements().size(), 3u);
    float mx = 0, mn = 0;
    for (float v : xv) mx = std::max(mx, v), mn = std::min(mn, v);
    const float scale = (mx - mn) / 255.0f;
    const int zp = static_cast<int>(std::nearbyint(std::clamp(-mn / scale, 0.0f, 255.0f)));
    EXPECT_EQ(r.elements()[1].to_vector<float>()[0], scale);
    EXPECT_EQ(r.elements()[2].to_vector<int>()[0], zp);
    auto y = r.elements()[0].to_vector<int>();
    for (std::size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(y[i], quantize_ref(xv[i], scale, zp, 0, 255));
}

TEST(ops_quantize, numpy_generator_matches_known_draws) {
    // numpy.random.seed(0); numpy.random.uniform(0, 1, 3)
    op::mt19937_numpy g(0);
    EXPECT_DOUBLE_EQ(g.next_double(), 0.5488135039273248);
    EXPECT_DOUBLE_EQ(g.next_double(), 0.7151893663724195);
    EXPECT_DOUBLE_EQ(g.next_double(), 0.6027633760716439);
}

TEST(ops_quantize, dropout_inference_training_and_seed) {
    auto xv = random_floats(4 * 5, -3, 3, 7);
    auto x = make(type::float32, {4, 5}, xv);
    auto ratio = make(type::float32, {}, std::vector<float>{0.75f});
    auto off = make(type::bool_, {}, std::vector<int>{0});
    auto on = make(type::bool_, {}, std::vector<int>{1});
    op::dropout_op d;
    d.seed = 0;
    EXPECT_FALSE(operation(d).traits().nondeterministic);
    EXPECT_TRUE(operation(op::dropout_op{}).traits().nondeterministic);
    auto inf = run(d, {x, ratio, off});
    EXPECT_EQ(inf.elements()[0].to_vector<float>(), xv);
    EXPECT_EQ(inf.elements()[1].to_vector<int>(), std::vector<int>(20, 1));
    auto tr = run(d, {x, ratio, on});
    auto y = tr.elements()[0].to_vector<float>();
    auto m = tr.elements()[1].to_vector<int>();
    op::mt19937_numpy g(0);
    for (std::size_t i = 0; i < xv.size(); ++i) {
        const bool keep = g.next_double() >= 0.75;
        EXPECT_EQ(m[i], keep ? 1 : 0);
        EXPECT_EQ(y[i], keep ? xv[i] * 4.0f : 0.0f);
    }
    EXPECT_EQ(run(d, {x, ratio, on}), tr);  // seeded: the same every run
}
