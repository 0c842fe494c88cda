// argmax/argmin, topk, nonzero, unique, compress, cumsum/cumprod, reverse_sequence and
// the generators (constant_of_shape, range, eye_like, one_hot, trilu).
#include "ops/tensor_generate.hpp"
#include "ops/tensor_scan.hpp"
#include "ops/tensor_select.hpp"
#include "tensor_test_util.hpp"

#include <algorithm>
#include <map>
#include <random>
#include <numeric>
#include <limits>
#include <cmath>

using namespace kiln;
using namespace kiln::test;

TEST(ops_tensor_select, argmax_argmin_ties_and_last_index) {
    // Rows with repeated extremes.
    auto x = make_arg(type::float32, {3, 4}, {1, 5, 5, 2, -3, -3, 0, -3, 7, 1, 7, 7});
    auto r = run_op(op::argmax{1, true, false}, {x});
    expect_values(r.outputs[0], {3, 1}, {1, 2, 0});
    r = run_op(op::argmax{1, false, true}, {x});
    expect_values(r.outputs[0], {3}, {2, 2, 3});
    r = run_op(op::argmin{-1, false, false}, {x});
    expect_values(r.outputs[0], {3}, {0, 0, 1});
    r = run_op(op::argmin{1, false, true}, {x});
    expect_values(r.outputs[0], {3}, {0, 3, 1});
    r = run_op(op::argmax{0, true, false}, {x});
    expect_values(r.outputs[0], {1, 4}, {2, 0, 2, 2});
    EXPECT_THROW(op::argmax{2}.compute_shape({x.get_shape()}), error);
}

TEST(ops_tensor_select, argmax_random_against_scan) {
    auto x = random_arg(type::float64, {5, 7}, 41);
    auto v = values(x);
    std::vector<double> expected;
    for (std::size_t c = 0; c < 7; ++c) {
        std::size_t best = 0;
        for (std::size_t r = 1; r < 5; ++r)
            if (v[r * 7 + c] > v[best * 7 + c]) best = r;
        expected.push_back(static_cast<double>(best));
    }
    expect_values(run_op(op::argmax{0, false, false}, {x}).outputs[0], {7}, expected);
}

TEST(ops_tensor_select, topk_is_stable_for_ties) {
    auto x = make_arg(type::int64, {2, 5}, {3, 1, 3, 2, 3, 0, 0, 4, 0, 4});
    auto r = run_op(op::topk{1, 3, true, true}, {x}, true, 2);
    expect_values(r.outputs[0], {2, 3}, {3, 3, 3, 4, 4, 0});
    expect_values(r.outputs[1], {2, 3}, {0, 2, 4, 2, 4, 0});
    r = run_op(op::topk{-1, 2, false, true}, {x}, false, 2);
    expect_values(r.outputs[0], {2, 2}, {1, 2, 0, 0});
    expect_values(r.outputs[1], {2, 2}, {1, 3, 0, 1});
    r = run_op(op::topk_dynamic{0, true, true}, {x, make_ints({1})}, true, 2);
    expect_values(r.outputs[0], {1, 5}, {3, 1, 4, 2, 4});
    expect_values(r.outputs[1], {1, 5}, {0, 0, 1, 0, 1});
    EXPECT_THROW((op::topk{1, 6, true, true}.compute_shape({x.get_shape()})), error);
}

TEST(ops_tensor_select, topk_random_against_sort) {
    auto x = random_arg(type::float32, {3, 9}, 42);
    auto v = values(x);
    auto r = run_op(op::topk{1, 4, true, true}, {x}, true, 2);
    for (std::size_t row = 0; row < 3; ++row) {
        std::vector<double> sorted(v.begin() + static_cast<std::ptrdiff_t>(row * 9), v.begin() + static_cast<std::ptrdiff_t>(row * 9 + 9));
        std::sort(sorted.rbegin(), sorted.rend());
        for (std::size_t j = 0; j < 4; ++j) {
            EXPECT_EQ(values(r.outputs[0])[row * 4 + j], sorted[j]);
            auto idx = static_cast<std::size_t>(values(r.outputs[1])[row * 4 + j]);
            EXPECT_EQ(v[row * 9 + idx], sorted[j]);
        }
    }
}

// The k selected and then sorted must be what a stable sort of the whole axis puts first:
// many ties (values from 8 levels), every k, the middle axis, smallest and largest; NaN
// ranks above every number.
TEST(ops_tensor_select, topk_selects_what_a_stable_sort_puts_first) {
    std::mt19937 rng(43);
    std::uniform_int_distribution<int> level(0, 7);
    const std::size_t outer = 2, len = 37, inner = 3;
    std::vector<float> v(outer * len * inner);
    for (auto& e : v) e = static_cast<float>(level(rng)) * 0.25f;
    v[5] = v[40] = std::numeric_limits<float>::quiet_NaN();
    auto x = make_arg(type::float32, {outer, len, inner}, std::vector<double>(v.begin(), v.end()));
    auto rank = [](float a) { return std::isnan(a) ? std::numeric_limits<double>::infinity() : double(a); };
    for (bool largest : {true, false})
        for (std::size_t k : {std::size_t{0}, std::size_t{1}, std::size_t{5}, std::size_t{36}, std::size_t{37}}) {
            auto r = run_op(op::topk{1, static_cast<std::int64_t>(k), largest, true}, {x}, false, 2);
            auto got = values(r.outputs[1]);
            for (std::size_t p = 0; p < outer; ++p)
                for (std::size_t q = 0; q < inner; ++q) {
                    std::vector<std::size_t> order(len);
                    std::iota(order.begin(), order.end(), std::size_t{0});
                    auto at = [&](std::size_t j) { return rank(v[(p * len + j) * inner + q]); };
                    std::stable_sort(order.begin(), order.end(), [&](std::size_t i, std::size_t j) {
                        return largest ? at(i) > at(j) : at(i) < at(j);
                    });
                    for (std::size_t j = 0; j < k; ++j)
                        ASSERT_EQ(got[(p * k + j) * inner + q], static_cast<double>(order[j]))
                            << (largest ? "largest" : "smallest") << " k " << k << " row " << p << "," << q << " rank " << j;
                }
        }
}

TEST(ops_tensor_select, nonzero_coordinates_row_major) {
    auto x = make_arg(type::float32, {2, 3}, {0, 2, 0, -1, 0, 5});
    auto r = run_op(op::nonzero{}, {x});
    expect_values(r.outputs[0], {2, 3}, {0, 1, 1, 1, 0, 2});
    EXPECT_TRUE(r.output_shapes[0].dynamic());
}

TEST(ops_tensor_select, nonzero_coordinates_of_a_3d_tensor) {
    std::mt19937 rng(44);
    std::bernoulli_distribution zero(0.4);
    const std::vector<std::size_t> l{3, 4, 5};
    std::vector<double> v(60);
    for (std::size_t i = 0; i < 60; ++i) v[i] = zero(rng) ? 0.0 : static_cast<double>(i) - 30.5;
    std::vector<double> rows[3];
    for (std::size_t i = 0; i < 60; ++i)
        if (v[i] != 0.0) {
            rows[0].push_back(static_cast<double>(i / 20));
            rows[1].push_back(static_cast<double>(i / 5 % 4));
            rows[2].push_back(static_cast<double>(i % 5));
        }
    std::vector<double> want;
    for (auto& r : rows) want.insert(want.end(), r.begin(), r.end());
    auto r = run_op(op::nonzero{}, {make_arg(type::float32, l, v)});
    expect_values(r.outputs[0], {3, rows[0].size()}, want);
}

TEST(ops_tensor_select, unique_sorted_unsorted_and_axis) {
    auto x = make_arg(type::int64, {7}, {4, 1, 4, -2, 1, 9, 4});
    auto r = run_op(op::unique{std::nullopt, true}, {x}, true, 4);
    expect_values(r.outputs[0], {4}, {-2, 1, 4, 9});
    expect_values(r.outputs[1], {4}, {3, 1, 0, 5});
    expect_values(r.outputs[2], {7}, {2, 1, 2, 0, 1, 3, 2});
    expect_values(r.outputs[3], {4}, {1, 2, 3, 1});
    r = run_op(op::unique{std::nullopt, false}, {x}, false, 4);
    expect_values(r.outputs[0], {4}, {4, 1, -2, 9});
    expect_values(r.outputs[1], {4}, {0, 1, 3, 5});
    expect_values(r.outputs[2], {7}, {0, 1, 0, 2, 1, 3, 0});
    expect_values(r.outputs[3], {4}, {3, 2, 1, 1});
    // Unique rows (axis 0), sorted lexicographically.
    auto m = make_arg(type::float32, {4, 2}, {2, 1, 1, 3, 2, 1, 1, 0});
    r = run_op(op::unique{0, true}, {m}, true, 4);
    expect_values(r.outputs[0], {3, 2}, {1, 0, 1, 3, 2, 1});
    expect_values(r.outputs[1], {3}, {3, 1, 0});
    expect_values(r.outputs[2], {4}, {2, 1, 2, 0});
    expect_values(r.outputs[3], {3}, {1, 1, 2});
}

TEST(ops_tensor_select, compress_with_and_without_axis) {
    auto x = random_arg(type::float32, {3, 4}, 43);
    auto v = values(x);
    auto cond = make_arg(type::bool_, {3}, {1, 0, 1});
    std::vector<double> expected;
    for (std::size_t r : {0, 2})
        for (std::size_t c = 0; c < 4; ++c) expected.push_back(v[r * 4 + c]);
    expect_values(run_op(op::compress{0}, {x, cond}).outputs[0], {2, 4}, expected);
    expect_values(run_op(op::compress{std::nullopt}, {x, cond}).outputs[0], {2}, {v[0], v[2]});
    auto long_cond = make_arg(type::bool_, {5}, {0, 0, 0, 0, 1});
    EXPECT_THROW(run_op(op::compress{0}, {x, long_cond}), error);
}

TEST(ops_tensor_select, cumsum_cumprod_modes) {
    auto x = random_arg(type::float64, {2, 4}, 44);
    auto v = values(x);
    auto axis = make_ints({1});
    for (bool excl : {false, true})
        for (bool rev : {false, true}) {
            std::vector<double> es(8), ep(8);
            for (std::size_t r = 0; r < 2; ++r)
                for (std::size_t c = 0; c < 4; ++c) {
                    double s = 0, p = 1;
                    for (std::size_t k = 0; k < 4; ++k) {
                        bool before = rev ? k > c : k < c;
                        if (before || (!excl && k == c)) {
                            s += v[r * 4 + k];
                            p *= v[r * 4 + k];
                        }
                    }
                    es[r * 4 + c] = s;
                    ep[r * 4 + c] = p;
                }
            expect_values(run_op(op::cumsum{excl, rev}, {x, axis}).outputs[0], {2, 4}, es, 1e-9);
            expect_values(run_op(op::cumprod{excl, rev}, {x, axis}).outputs[0], {2, 4}, ep, 1e-6);
        }
    // int32 wraps like the narrow type.
    auto big = make_arg(type::int32, {2}, {2147483647, 1});
    EXPECT_EQ(values(run_op(op::cumsum{}, {big, make_ints({0})}).outputs[0])[1], -2147483648.0);
    EXPECT_THROW(run_op(op::cumsum{}, {x, make_ints({2})}), error);
}

TEST(ops_tensor_select, reverse_sequence_per_batch) {
    auto x = random_arg(type::float32, {4, 3}, 45);  // time 4, batch 3
    auto v = values(x);
    std::vector<std::int64_t> lens{4, 1, 2};
    std::vector<double> expected(12);
    for (std::size_t t = 0; t < 4; ++t)
        for (std::size_t b = 0; b < 3; ++b) {
            auto n = static_cast<std::size_t>(lens[b]);
            auto src = t < n ? n - 1 - t : t;
            expected[t * 3 + b] = v[src * 3 + b];
        }
    expect_values(run_op(op::reverse_sequence{1, 0}, {x, make_ints(lens)}).outputs[0], {4, 3}, expected);
    EXPECT_THROW(run_op(op::reverse_sequence{1, 0}, {x, make_ints({5, 1, 1})}), error);
}

TEST(ops_tensor_generate, constant_of_shape_range_eye_like) {
    auto r = run_op(op::constant_of_shape{literal(std::int64_t{7})}, {make_ints({2, 3})});
    expect_values(r.outputs[0], {2, 3}, std::vector<double>(6, 7));
    EXPECT_EQ(r.outputs[0].get_shape().get_type(), type::int64);
    auto s = [](double v, type t) { return make_arg(t, {}, {v}); };
    expect_values(run_op(op::range{}, {s(1, type::float32), s(2.5, type::float32), s(0.5, type::float32)}).outputs[0],
                  {3}, {1, 1.5, 2});
    expect_values(run_op(op::range{}, {s(10, type::int32), s(6, type::int32), s(-3, type::int32)}).outputs[0], {2},
                  {10, 7});
    expect_values(run_op(op::range{}, {s(5, type::int64), s(1, type::int64), s(2, type::int64)}).outputs[0], {0}, {});
    EXPECT_THROW(run_op(op::range{}, {s(0, type::int64), s(1, type::int64), s(0, type::int64)}), error);
    auto lo = make_ints({std::numeric_limits<std::int64_t>::min()}).reshape(shape(type::int64));
    auto hi = make_ints({std::numeric_limits<std::int64_t>::max()}).reshape(shape(type::int64));
    EXPECT_THROW(run_op(op::range{}, {lo, hi, s(1, type::int64)}), error);  // too long, not an overflow
    auto x = random_arg(type::float32, {3, 4}, 46);
    std::vector<double> eye(12, 0);
    for (std::size_t i = 0; i < 3; ++i)
        if (i + 1 < 4) eye[i * 4 + i + 1] = 1;
    auto e = run_op(op::eye_like{1, type::int32}, {x});
    expect_values(e.outputs[0], {3, 4}, eye);
    EXPECT_EQ(e.outputs[0].get_shape().get_type(), type::int32);
}

TEST(ops_tensor_generate, one_hot_axes_and_negative_indices) {
    auto ind = make_arg(type::int64, {3}, {1, -1, 7});  // 7 is out of range: all off
    auto vals = make_arg(type::float32, {2}, {-2, 3});
    expect_values(run_op(op::one_hot{-1, 4}, {ind, vals}).outputs[0], {3, 4},
                  {-2, 3, -2, -2, -2, -2, -2, 3, -2, -2, -2, -2});
    expect_values(run_op(op::one_hot{0, 4}, {ind, vals}).outputs[0], {4, 3},
                  {-2, -2, -2, 3, -2, -2, -2, -2, -2, -2, 3, -2});
    auto depth = make_arg(type::float32, {}, {4});
    expect_values(run_op(op::one_hot_dynamic{-1}, {ind, depth, vals}).outputs[0], {3, 4},
                  {-2, 3, -2, -2, -2, -2, -2, 3, -2, -2, -2, -2});
}

TEST(ops_tensor_generate, trilu_upper_lower_k) {
    auto x = random_arg(type::int64, {2, 3, 4}, 47);
    auto v = values(x);
    for (bool upper : {true, false})
        for (std::int64_t k : {-1, 0, 2}) {
            std::vector<double> e(24);
            for (std::size_t i = 0; i < 24; ++i) {
                auto r = static_cast<std::int64_t>((i / 4) % 3), c = static_cast<std::int64_t>(i % 4);
                bool keep = upper ? c >= r + k : c <= r + k;
                e[i] = keep ? v[i] : 0;
            }
            expect_values(run_op(op::trilu{upper}, {x, make_ints({k})}).outputs[0], {2, 3, 4}, e);
        }
}
