// gather, gather_elements, gather_nd, scatter_elements (reductions), scatter_nd,
// tensor_scatter: against direct index loops written here.
#include "ops/tensor_gather.hpp"
#include "ops/tensor_views.hpp"
#include "tensor_test_util.hpp"

using namespace kiln;
using namespace kiln::test;

TEST(ops_tensor_index, gather_any_axis_negative_indices) {
    const std::vector<std::size_t> lens{3, 4, 5};
    auto x = random_arg(type::float32, lens, 31);
    auto xv = values(x);
    std::vector<std::int64_t> ind{2, -1, 0, 1, -3, 2};  // shape [2, 3]
    for (std::int64_t axis : {0, 1, 2, -1}) {
        auto a = static_cast<std::size_t>(axis < 0 ? axis + 3 : axis);
        std::vector<std::size_t> ol(lens.begin(), lens.begin() + static_cast<std::ptrdiff_t>(a));
        ol.push_back(2);
        ol.push_back(3);
        ol.insert(ol.end(), lens.begin() + static_cast<std::ptrdiff_t>(a) + 1, lens.end());
        std::vector<double> expected(count(ol));
        for (std::size_t i = 0; i < expected.size(); ++i) {
            auto o = unravel(i, ol);
            std::vector<std::size_t> src;
            for (std::size_t d = 0; d < a; ++d) src.push_back(o[d]);
            auto v = ind[o[a] * 3 + o[a + 1]];
            auto n = static_cast<std::int64_t>(lens[a]);
            src.push_back(static_cast<std::size_t>(v < 0 ? v + n : v));
            for (std::size_t d = a + 2; d < o.size(); ++d) src.push_back(o[d]);
            expected[i] = xv[ravel(src, lens)];
        }
        auto idx = literal(shape(type::int64, {2, 3}), ind).get_argument();
        for (bool compile : {false, true}) expect_values(run_op(op::gather{axis}, {x, idx}, compile).outputs[0], ol, expected);
    }
    auto bad = literal(shape(type::int32, {1}), std::vector<int>{5}).get_argument();
    EXPECT_THROW(run_op(op::gather{1}, {x, bad}), error);
    EXPECT_THROW(op::gather{0}.compute_shape({x.get_shape(), shape(type::float32, {1})}), error);
}

TEST(ops_tensor_index, gather_of_transposed_data) {
    auto x = random_arg(type::int64, {4, 3}, 32);
    auto xv = values(x);
    auto idx = make_ints({3, 0});
    auto prep = [](module& m, instruction_ref p, std::size_t i) {
        return i == 0 ? m.add_instruction(op::transpose{{1, 0}}, {p}) : p;
    };
    // transposed: [3, 4]; gather columns 3, 0 along axis 1.
    std::vector<double> expected;
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t c : {3, 0}) expected.push_back(xv[c * 3 + r]);
    expect_values(run_op(op::gather{1}, {x, idx}, true, prep).outputs[0], {3, 2}, expected);
}

TEST(ops_tensor_index, gather_elements_and_scatter_elements) {
    const std::vector<std::size_t> lens{3, 4};
    auto x = random_arg(type::float32, lens, 33);
    auto xv = values(x);
    std::vector<std::int64_t> ind{0, 2, -1, 1, 3, 0};  // shape [2, 3], along axis 1
    auto idx = literal(shape(type::int64, {2, 3}), ind).get_argument();
    std::vector<double> expected;
    for (std::size_t r = 0; r < 2; ++r)
        for (std::size_t c = 0; c < 3; ++c) {
            auto v = ind[r * 3 + c];
            expected.push_back(xv[r * 4 + static_cast<std::size_t>(v < 0 ? v + 4 : v)]);
        }
    expect_values(run_op(op::gather_elements{1}, {x, idx}).outputs[0], {2, 3}, expected);

    auto upd = random_arg(type::float32, {2, 3}, 34);
    auto uv = values(upd);
    for (std::string red : {"none", "add", "mul", "max", "min"}) {
        auto e = xv;
        for (std::size_t r = 0; r < 2; ++r)
            for (std::size_t c = 0; c < 3; ++c) {
                auto v = ind[r * 3 + c];
                auto& t = e[r * 4 + static_cast<std::size_t>(v < 0 ? v + 4 : v)];
                double u = uv[r * 3 + c];
                t = red == "none" ? u : red == "add" ? t + u : red == "mul" ? t * u : red == "max" ? std::max(t, u) : std::min(t, u);
            }
        for (bool compile : {false, true})
            expect_values(run_op(op::scatter_elements{1, red}, {x, idx, upd}, compile).outputs[0], lens, e, 1e-5);
    }
    // Duplicate indices accumulate under "add".
    auto dup = literal(shape(type::int64, {1, 2}), std::vector<std::int64_t>{1, 1}).get_argument();
    auto two = make_arg(type::float32, {1, 2}, {10, 20});
    auto r = run_op(op::scatter_elements{1, "add"}, {x, dup, two});
    EXPECT_FLOAT_EQ(static_cast<float>(values(r.outputs[0])[1]), static_cast<float>(xv[1] + 30));
    EXPECT_THROW(run_op(op::scatter_elements{1, "sum"}, {x, idx, upd}), error);
    EXPECT_THROW(op::scatter_elements{0}.compute_shape({x.get_shape(), shape(type::int64, {2, 3}), shape(type::float32, {3, 2})}),
                 error);
}

// torchvision's RoI poolers: one level index per RoI expanded over [R, C, W] (a broadcast
// view, read in place), and a transposed view; int32 indices; an index out of range.
TEST(ops_tensor_index, scatter_elements_reads_index_views_in_place) {
    const std::vector<std::size_t> lens{5, 3, 4};
    auto x = random_arg(type::float32, lens, 35);
    auto upd = random_arg(type::float32, {3, 3, 4}, 36);
    auto xv = values(x), uv = values(upd);
    argument rows(shape(type::int64, {3}));
    const std::int64_t rv[] = {4, 0, -3};
    std::copy(rv, rv + 3, rows.data_as<std::int64_t>());
    auto expanded = rows.view(shape(type::int64, {3, 3, 4}, {1, 0, 0}));
    auto e = xv;
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t k = 0; k < 12; ++k) e[static_cast<std::size_t>(rv[r] < 0 ? rv[r] + 5 : rv[r]) * 12 + k] = uv[r * 12 + k];
    expect_values(run_op(op::scatter_elements{0, "none"}, {x, expanded, upd}).outputs[0], lens, e);
    expect_values(run_op(op::scatter_elements{0, "none"}, {x, expanded.copy(), upd}).outputs[0], lens, e);
    // Along the last axis with a transposed index view: target (r, c, idx[r, c, k]).
    argument t_buf(shape(type::int64, {4, 3, 3}));
    for (std::size_t i = 0; i < 36; ++i) t_buf.data_as<std::int64_t>()[i] = static_cast<std::int64_t>((i * 7) % 4);
    auto transposed = t_buf.view(shape(type::int64, {3, 3, 4}, {3, 1, 9}));
    auto tv = values(transposed);
    e = xv;
    for (std::size_t r = 0; r < 3; ++r)
        for (std::size_t c = 0; c < 3; ++c)
            for (std::size_t k = 0; k < 4; ++k)
                e[r * 12 + c * 4 + static_cast<std::size_t>(tv[r * 12 + c * 4 + k])] += uv[r * 12 + c * 4 + k];
    expect_values(run_op(op::scatter_elements{2, "add"}, {x, transposed, upd}).outputs[0], lens, e, 1e-5);
    auto as32 = literal(shape(type::int32, {3, 3, 4}), tv).get_argument();
    expect_values(run_op(op::scatter_elements{2, "add"}, {x, as32, upd}).outputs[0], lens, e, 1e-5);
    rows.data_as<std::int64_t>()[1] = -6;
    EXPECT_THROW(run_op(op::scatter_elements{0, "none"}, {x, expanded, upd}), error);
}

TEST(ops_tensor_index, gather_nd_with_batch_dims) {
    const std::vector<std::size_t> lens{2, 3, 4};
    auto x = random_arg(type::float32, lens, 35);
    auto xv = values(x);
    // batch_dims 0, depth 2: indices [3, 2] -> output [3, 4].
    std::vector<std::int64_t> ind{1, 2, 0, -1, 1, 0};
    auto idx = literal(shape(type::int64, {3, 2}), ind).get_argument();
    std::vector<double> expected;
    for (std::size_t t = 0; t < 3; ++t) {
        auto a = static_cast<std::size_t>(ind[t * 2]), b = static_cast<std::size_t>(ind[t * 2 + 1] < 0 ? ind[t * 2 + 1] + 3 : ind[t * 2 + 1]);
        for (std::size_t k = 0; k < 4; ++k) expected.push_back(xv[(a * 3 + b) * 4 + k]);
    }
    expect_values(run_op(op::gather_nd{0}, {x, idx}).outputs[0], {3, 4}, expected);
    // batch_dims 1, depth 1: indices [2, 2, 1] -> output [2, 2, 4].
    std::vector<std::int64_t> ind2{2, 0, 1, 1};
    auto idx2 = literal(shape(type::int64, {2, 2, 1}), ind2).get_argument();
    expected.clear();
    for (std::size_t bb = 0; bb < 2; ++bb)
        for (std::size_t t = 0; t < 2; ++t)
            for (std::size_t k = 0; k < 4; ++k) expected.push_back(xv[(bb * 3 + static_cast<std::size_t>(ind2[bb * 2 + t])) * 4 + k]);
    expect_values(run_op(op::gather_nd{1}, {x, idx2}).outputs[0], {2, 2, 4}, expected);
    EXPECT_THROW(op::gather_nd{0}.compute_shape({x.get_shape(), shape(type::int64, {2, 4})}), error);
}

TEST(ops_tensor_index, scatter_nd_reductions) {
    const std::vector<std::size_t> lens{4, 3};
    auto x = random_arg(type::float32, lens, 36);
    auto xv = values(x);
    std::vector<std::int64_t> ind{3, 0, -4};  // rows, shape [3, 1]
    auto idx = literal(shape(type::int64, {3, 1}), ind).get_argument();
    auto upd = random_arg(type::float32, {3, 3}, 37);
    auto uv = values(upd);
    for (std::string red : {"none", "add", "mul", "max", "min"}) {
        auto e = xv;
        for (std::size_t t = 0; t < 3; ++t) {
            auto row = static_cast<std::size_t>(ind[t] < 0 ? ind[t] + 4 : ind[t]);
            for (std::size_t c = 0; c < 3; ++c) {
                auto& v = e[row * 3 + c];
                double u = uv[t * 3 + c];
                v = red == "none" ? u : red == "add" ? v + u : red == "mul" ? v * u : red == "max" ? std::max(v, u) : std::min(v, u);
            }
        }
        expect_values(run_op(op::scatter_nd{red}, {x, idx, upd}).outputs[0], lens, e, 1e-5);
    }
    EXPECT_THROW(op::scatter_nd{}.compute_shape({x.get_shape(), idx.get_shape(), shape(type::float32, {3, 2})}), error);
}

TEST(ops_tensor_index, tensor_scatter_linear_and_circular) {
    // cache [batch 2, heads 1, seq 5, dim 3], update seq 2, axis -2.
    const std::vector<std::size_t> pl{2, 1, 5, 3};
    auto past = random_arg(type::float32, pl, 38);
    auto upd = random_arg(type::float32, {2, 1, 2, 3}, 39);
    auto pv = values(past), uv = values(upd);
    for (std::string mode : {"linear", "circular"}) {
        std::vector<std::int64_t> w{1, mode == "linear" ? 3 : 4};
        auto e = pv;
        for (std::size_t b = 0; b < 2; ++b)
            for (std::size_t s = 0; s < 2; ++s) {
                auto pos = static_cast<std::size_t>(w[b] + static_cast<std::int64_t>(s)) % 5;
                for (std::size_t d = 0; d < 3; ++d) e[(b * 5 + pos) * 3 + d] = uv[(b * 2 + s) * 3 + d];
            }
        expect_values(run_op(op::tensor_scatter{-2, mode}, {past, upd, make_ints(w)}).outputs[0], pl, e);
    }
    // No write indices: write at 0. Past the end in linear mode is an error.
    auto e = pv;
    for (std::size_t b = 0; b < 2; ++b)
        for (std::size_t s = 0; s < 2; ++s)
            for (std::size_t d = 0; d < 3; ++d) e[(b * 5 + s) * 3 + d] = uv[(b * 2 + s) * 3 + d];
    expect_values(run_op(op::tensor_scatter{}, {past, upd}).outputs[0], pl, e);
    EXPECT_THROW(run_op(op::tensor_scatter{}, {past, upd, make_ints({4, 0})}), error);
}
