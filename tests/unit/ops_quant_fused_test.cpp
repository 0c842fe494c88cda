// quant_convolution and quant_dot (the fuse_qdq pass's integer ops) against a naive
// integer reference written here: random non-zero data, per-tensor and per-channel
// weight scales, uint8 and int8 activations, float32 and quantized results.
#include "ops/quant_fused.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/quantize.hpp"

#include <kiln/context.hpp>
#include <kiln/literal.hpp>
#include <kiln/reflect.hpp>

#include <gtest/gtest.h>

#include <algorithm>
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

std::vector<int> random_ints(std::size_t n, int lo, int hi, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<int> v(n);
    for (auto& x : v) x = d(gen);
    return v;
}

argument tensor(type t, std::vector<std::size_t> lens, const std::vector<int>& v) {
    return literal(shape(t, std::move(lens)), v).get_argument();
}

// ONNX QuantizeLinear of one value: round half to even, zero point, saturate.
double quantize(float v, const op::requantize_params& p) {
    double r = std::nearbyint(v / p.y_scale) + static_cast<double>(p.y_zero_point);
    return std::min<double>(std::max<double>(r, static_cast<double>(p.y_min)), static_cast<double>(p.y_max));
}

// What the op's result must be for accumulator a of channel c (float bias b, or none).
double expected(std::int64_t a, std::size_t c, double b, const op::requantize_params& p) {
    const float v = static_cast<float>(static_cast<double>(a) * p.channel_scale(c) + b);
    return p.quantized_output() ? quantize(v, p) : v;
}

void set_params(op::requantize_params& p, type x, std::size_t channels, bool per_channel, type out) {
    p.x_scale = 0.02f;
    p.x_zero_point = x == type::uint8 ? 121 : -7;
    p.w_scales.clear();
    for (std::size_t c = 0; c < (per_channel ? channels : 1); ++c) p.w_scales.push_back(0.003f + 0.001f * c);
    p.out_type = out;
    p.y_scale = 0.05f;
    p.y_zero_point = out == type::int8 ? -3 : 128;
    p.y_min = out == type::int8 ? -128 : 0;
    p.y_max = out == type::int8 ? 127 : 255;
}

struct quant_case {
    type x;
    bool per_channel;
    type out;
};

class quant_fused : public testing::TestWithParam<quant_case> {};

TEST_P(quant_fused, convolution_matches_a_naive_integer_reference) {
    const auto k = GetParam();
    const std::size_t n = 2, c = 3, h = 5, w = 4, m = 4, kh = 3, kw = 3;  // pad 1, stride 1
    op::quant_convolution q;
    q.padding = {1, 1, 1, 1};
    set_params(q, k.x, m, k.per_channel, k.out);
    q.has_bias = true;
    const int xlo = k.x == type::uint8 ? 0 : -128, xhi = k.x == type::uint8 ? 255 : 127;
    auto xv = random_ints(n * c * h * w, xlo, xhi, 1);
    auto wv = random_ints(m * c * kh * kw, -127, 127, 2);
    std::vector<float> bias{0.5f, -1.25f, 2.0f, 0.0f};
    auto y = run(q, {tensor(k.x, {n, c, h, w}, xv), tensor(type::int8, {m, c, kh, kw}, wv),
                     literal(shape(type::float32, {m}), bias).get_argument()});
    ASSERT_EQ(y.get_shape(), shape(k.out, {n, m, h, w}));
    auto got = y.to_vector<double>();
    std::size_t i = 0, nonzero = 0;
    for (std::size_t b = 0; b < n; ++b)
        for (std::size_t o = 0; o < m; ++o)
            for (std::size_t r = 0; r < h; ++r)
                for (std::size_t s = 0; s < w; ++s, ++i) {
                    std::int64_t acc = 0;
                    for (std::size_t ci = 0; ci < c; ++ci)
                        for (std::size_t u = 0; u < kh; ++u)
                            for (std::size_t v = 0; v < kw; ++v) {
                                const auto yy = static_cast<std::int64_t>(r + u) - 1, xx = static_cast<std::int64_t>(s + v) - 1;
                                if (yy < 0 || xx < 0 || yy >= static_cast<std::int64_t>(h) || xx >= static_cast<std::int64_t>(w)) continue;
                                const std::int64_t xq = xv[((b * c + ci) * h + yy) * w + xx] - q.x_zero_point;
                                acc += xq * wv[((o * c + ci) * kh + u) * kw + v];
                            }
                    ASSERT_EQ(got[i], expected(acc, o, bias[o], q)) << "element " << i;
                    nonzero += got[i] != 0;
                }
    EXPECT_GT(nonzero, i / 2);
}

TEST_P(quant_fused, dot_matches_a_naive_integer_reference) {
    const auto k = GetParam();
    const std::size_t rows = 5, depth = 7, cols = 6;
    op::quant_dot q;
    set_params(q, k.x, cols, k.per_channel, k.out);
    q.w_zero_point = k.per_channel ? 0 : 3;  // a run-time operand's zero point
    const int xlo = k.x == type::uint8 ? 0 : -128, xhi = k.x == type::uint8 ? 255 : 127;
    auto av = random_ints(2 * rows * depth, xlo, xhi, 3);
    auto bv = random_ints(depth * cols, -127, 127, 4);
    auto y = run(q, {tensor(k.x, {2, rows, depth}, av), tensor(type::int8, {depth, cols}, bv)});
    ASSERT_EQ(y.get_shape(), shape(k.out, {2, rows, cols}));
    auto got = y.to_vector<double>();
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t j = 0; j < cols; ++j) {
                std::int64_t acc = 0;
                for (std::size_t d = 0; d < depth; ++d)
                    acc += (av[(b * rows + r) * depth + d] - q.x_zero_point) * (bv[d * cols + j] - q.w_zero_point);
                ASSERT_EQ(got[(b * rows + r) * cols + j], expected(acc, j, 0.0, q));
            }
}

INSTANTIATE_TEST_SUITE_P(ops, quant_fused,
                         testing::Values(quant_case{type::uint8, false, type::uint8},
                                         quant_case{type::uint8, true, type::uint8},
                                         quant_case{type::int8, false, type::int8},
                                         quant_case{type::int8, true, type::float32},
                                         quant_case{type::uint8, true, type::float32}));

TEST(ops_quant_fused, int32_bias_is_added_to_the_accumulator_and_the_range_narrows) {
    op::quant_dot q;
    set_params(q, type::uint8, 2, true, type::uint8);
    q.has_bias = true;
    q.y_min = 130;  // a folded Relu / Clip
    q.y_max = 140;
    auto y = run(q, {tensor(type::uint8, {1, 1}, {125}), tensor(type::int8, {1, 2}, {100, -100}),
                     tensor(type::int32, {2}, {1000, 0})});
    // acc = 4 * 100 + 1000 = 1400 -> 1400 * 0.02 * 0.003 / 0.05 = 1.68 -> 2 + 128 -> 130 (y_min);
    // acc = -400 -> -400 * 0.02 * 0.004 / 0.05 = -0.64 -> -1 + 128 = 127 -> 130.
    EXPECT_EQ(y.to_vector<int>(), (std::vector<int>{130, 130}));
}

TEST(ops_quant_fused, rejects_bad_parameters) {
    op::quant_dot q;
    q.w_scales = {1.0f, 2.0f, 3.0f};
    host_context ctx;
    EXPECT_THROW(q.compute_shape({shape(type::uint8, {2, 4}), shape(type::int8, {4, 2})}), error);
    q.w_scales = {1.0f};
    EXPECT_THROW(q.compute_shape({shape(type::float32, {2, 4}), shape(type::int8, {4, 2})}), error);
}


// The residual form (quantize_int8's fused residual add): its float32 steps are those of
// the unfused graph quant_convolution (float32 result) -> Add(., DequantizeLinear(r)) ->
// Relu -> QuantizeLinear, run here op by op: equal exactly, on random non-zero data.
TEST(ops_quant_fused, residual_convolution_equals_the_unfused_add_relu_quantize) {
    for (type rt : {type::uint8, type::int8}) {
        op::quant_convolution plain;
        set_params(plain, type::uint8, 6, true, type::float32);
        plain.padding = {1, 1, 1, 1};
        plain.has_bias = true;
        auto x = tensor(type::uint8, {2, 4, 5, 3}, random_ints(2 * 4 * 5 * 3, 0, 255, 11));
        auto w = tensor(type::int8, {6, 4, 3, 3}, random_ints(6 * 4 * 9, -127, 127, 12));
        auto b = literal(shape(type::float32, {6}), std::vector<float>{0.5f, -1.25f, 2, 0, -0.75f, 3}).get_argument();
        auto r = tensor(rt, {2, 6, 5, 3}, random_ints(2 * 6 * 5 * 3, rt == type::int8 ? -128 : 0,
                                                      rt == type::int8 ? 127 : 255, 13));
        const float r_scale = 0.07f;
        const std::int64_t r_zero = rt == type::int8 ? 5 : 131;

        // Unfused: the float product, DequantizeLinear(r), Add, Relu, QuantizeLinear.
        auto v = run(plain, {x, w, b});
        auto rs = literal(shape(type::float32, {}), std::vector<float>{r_scale}).get_argument();
        auto rz = literal(shape(rt, {}), std::vector<double>{static_cast<double>(r_zero)}).get_argument();
        auto rd = run(op::dequantize_linear_op{}, {r, rs, rz});
        auto sum = run(op::add_op{}, {v, rd});
        auto relu = run(op::relu_op{}, {sum});
        auto ys = literal(shape(type::float32, {}), std::vector<float>{0.05f}).get_argument();
        auto yz = literal(shape(type::uint8, {}), std::vector<double>{7}).get_argument();
        op::quantize_linear_op q;
        q.output_type = type::uint8;
        auto want = run(q, {relu, ys, yz});

        // Fused: the residual operand, the Relu folded into the saturation (y_min = the zero point).
        op::quant_convolution fused = plain;
        fused.has_residual = true;
        fused.r_scale = r_scale;
        fused.r_zero_point = r_zero;
        fused.out_type = type::uint8;
        fused.y_scale = 0.05f;
        fused.y_zero_point = 7;
        fused.y_min = 7;
        fused.y_max = 255;
        auto got = run(fused, {x, w, b, r});
        EXPECT_EQ(got.to_vector<int>(), want.to_vector<int>()) << type_name(rt);
        // Not a degenerate case: values on both sides of the Relu, and the residual matters.
        auto g = got.to_vector<int>();
        EXPECT_GT(std::count_if(g.begin(), g.end(), [](int a) { return a > 7; }), static_cast<long>(g.size() / 4));
        EXPECT_GT(std::count(g.begin(), g.end(), 7), 0);
        fused.has_residual = false;
        EXPECT_NE(run(fused, {x, w, b}).to_vector<int>(), g);

        // A float32 result: the unfused sum itself.
        op::quant_convolution to_float = plain;
        to_float.has_residual = true;
        to_float.r_scale = r_scale;
        to_float.r_zero_point = r_zero;
        EXPECT_EQ(run(to_float, {x, w, b, r}), sum);
    }
}

TEST(ops_quant_fused, residual_operand_is_checked) {
    op::quant_convolution q;
    q.has_residual = true;
    const shape x(type::uint8, {1, 2, 3, 3}), w(type::int8, {4, 2, 1, 1});
    EXPECT_NO_THROW(q.compute_shape({x, w, shape(type::uint8, {1, 4, 3, 3})}));
    EXPECT_THROW(q.compute_shape({x, w}), error);                                         // missing
    EXPECT_THROW(q.compute_shape({x, w, shape(type::uint8, {1, 4, 3, 2})}), error);       // other lens
    EXPECT_THROW(q.compute_shape({x, w, shape(type::float32, {1, 4, 3, 3})}), error);     // not 8-bit
}

// Attributes saved before the residual fields existed (.kiln files read them with the same
// from_value): the missing keys keep their defaults, so old programs load unchanged.
TEST(ops_quant_fused, attributes_without_the_residual_fields_load_as_no_residual) {
    op::quant_convolution q;
    set_params(q, type::uint8, 3, true, type::uint8);
    q.has_bias = true;
    operation op = q;
    value v = op.to_value();
    ASSERT_TRUE(v.contains("has_residual"));
    auto& fields = v.get_object();
    std::erase_if(fields, [](const auto& kv) {
        return kv.first == "has_residual" || kv.first == "r_scale" || kv.first == "r_zero_point";
    });
    ASSERT_FALSE(v.contains("r_scale"));
    auto back = operation(op::quant_convolution{}).with_value(v);
    EXPECT_EQ(back, op);
    EXPECT_FALSE(back.get<op::quant_convolution>().has_residual);
    EXPECT_EQ(operation_from_value(operation_to_value(back)), op);
}

}  // namespace
