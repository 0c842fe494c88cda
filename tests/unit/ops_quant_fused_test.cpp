// quant_convolution and quant_dot (the fuse_qdq pass's integer ops) against a naive
// integer reference written here: random non-zero data, per-tensor and per-channel
// weight scales, uint8 and int8 activations, float32 and quantized results.
#include "ops/quant_fused.hpp"

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

}  // namespace
