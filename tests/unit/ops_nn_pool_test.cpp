// pooling, pooling_with_indices and max_unpool against direct 2-D loops written here.
#include "ops/nn_pooling.hpp"
#include "ops_nn_helpers.hpp"

#include <algorithm>
#include <limits>

using namespace kiln;
using namespace kiln::test_nn;
using lens_t = std::vector<std::size_t>;
using ints = std::vector<std::int64_t>;

namespace {

struct pool2d {
    op::pooling_mode mode;
    ints k, s, d, pads;  // pads {top, left, bottom, right}
    bool ceil_mode = false, include_pad = false;
    std::int64_t p = 2;
};

// 2-D pooling of x (N, C, H, W) by its definition; `argmax` receives flat input indices.
std::vector<double> naive_pool(const pool2d& c, const lens_t& xl, const std::vector<double>& x, lens_t& out,
                               std::vector<std::int64_t>* argmax = nullptr) {
    const auto h = static_cast<std::int64_t>(xl[2]), w = static_cast<std::int64_t>(xl[3]);
    auto size = [&](std::int64_t in, int i) {
        const std::int64_t span = in + c.pads[i] + c.pads[i + 2] - ((c.k[i] - 1) * c.d[i] + 1);
        std::int64_t o = (c.ceil_mode ? (span + c.s[i] - 1) / c.s[i] : span / c.s[i]) + 1;
        if (c.ceil_mode && (o - 1) * c.s[i] >= in + c.pads[i]) --o;
        return o;
    };
    const std::int64_t oh = size(h, 0), ow = size(w, 1);
    out = {xl[0], xl[1], static_cast<std::size_t>(oh), static_cast<std::size_t>(ow)};
    std::vector<double> y;
    for (std::size_t nc = 0; nc < xl[0] * xl[1]; ++nc)
        for (std::int64_t i = 0; i < oh; ++i)
            for (std::int64_t j = 0; j < ow; ++j) {
                double acc = c.mode == op::pooling_mode::max ? -std::numeric_limits<double>::infinity() : 0.0;
                std::int64_t count = 0, padded = 0, best = 0;
                for (std::int64_t a = 0; a < c.k[0]; ++a)
                    for (std::int64_t b = 0; b < c.k[1]; ++b) {
                        const std::int64_t r = i * c.s[0] - c.pads[0] + a * c.d[0];
                        const std::int64_t q = j * c.s[1] - c.pads[1] + b * c.d[1];
                        if (r >= -c.pads[0] && r < h + c.pads[2] && q >= -c.pads[1] && q < w + c.pads[3]) ++padded;
                        if (r < 0 || r >= h || q < 0 || q >= w) continue;
                        ++count;
                        const std::int64_t at = static_cast<std::int64_t>(nc) * h * w + r * w + q;
                        const double v = x[static_cast<std::size_t>(at)];
                        if (c.mode == op::pooling_mode::max) {
                            if (v > acc) best = at;
                            acc = std::max(acc, v);
                        } else if (c.mode == op::pooling_mode::average) {
                            acc += v;
                        } else {
                            acc += std::pow(std::fabs(v), static_cast<double>(c.p));
                        }
                    }
                if (c.mode == op::pooling_mode::average) acc /= static_cast<double>(c.include_pad ? padded : count);
                if (c.mode == op::pooling_mode::lp) acc = std::pow(acc, 1.0 / static_cast<double>(c.p));
                y.push_back(acc);
                if (argmax) argmax->push_back(best);
            }
    return y;
}

op::pooling make_pool(const pool2d& c) {
    op::pooling op;
    op.mode = c.mode;
    op.lengths = c.k;
    op.stride = c.s;
    op.dilation = c.d;
    op.padding = c.pads;
    op.ceil_mode = c.ceil_mode;
    op.count_include_pad = c.include_pad;
    op.p = c.p;
    return op;
}

void check_pool(const pool2d& c, const lens_t& xl, type t = type::float32) {
    auto x = random_arg(t, xl);
    lens_t out;
    auto expected = naive_pool(c, xl, x.to_vector<double>(), out);
    auto y = run(make_pool(c), {x});
    EXPECT_EQ(y.get_shape(), shape(t, out));
    expect_near(y, expected, t == type::float16 ? 2e-3 : 1e-6, 1e-6);
}

}  // namespace

TEST(ops_nn_pool, max) {
    check_pool({op::pooling_mode::max, {3, 2}, {2, 1}, {1, 1}, {1, 0, 1, 1}}, {2, 3, 7, 6});
    check_pool({op::pooling_mode::max, {2, 2}, {2, 2}, {2, 1}, {0, 0, 0, 0}, true}, {1, 2, 8, 7});
    check_pool({op::pooling_mode::max, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}}, {1, 2, 9, 9}, type::float16);
}

TEST(ops_nn_pool, max_int8) {
    auto v = random_ints(2 * 25, -128, 127);
    auto x = make_arg(type::int8, {1, 2, 5, 5}, v);
    pool2d c{op::pooling_mode::max, {2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}};
    lens_t out;
    auto expected = naive_pool(c, {1, 2, 5, 5}, std::vector<double>(v.begin(), v.end()), out);
    auto y = run(make_pool(c), {x});
    EXPECT_EQ(y.get_shape().get_type(), type::int8);
    expect_near(y, expected, 0, 0);
}

TEST(ops_nn_pool, average_count_include_pad_and_ceil) {
    for (bool include : {false, true})
        for (bool ceil : {false, true}) {
            check_pool({op::pooling_mode::average, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, ceil, include}, {1, 3, 8, 7});
            check_pool({op::pooling_mode::average, {2, 3}, {3, 2}, {2, 1}, {1, 0, 0, 2}, ceil, include}, {2, 1, 9, 8});
        }
}

TEST(ops_nn_pool, lp) {
    check_pool({op::pooling_mode::lp, {2, 2}, {1, 2}, {1, 1}, {0, 1, 1, 0}, false, false, 2}, {1, 2, 5, 6});
    check_pool({op::pooling_mode::lp, {3, 2}, {2, 1}, {1, 2}, {1, 1, 1, 1}, false, false, 3}, {1, 2, 6, 6});
}

TEST(ops_nn_pool, global_and_1d_3d) {
    auto x = random_arg(type::float32, {2, 3, 4, 5});
    auto xv = x.to_vector<double>();
    op::pooling avg;
    avg.mode = op::pooling_mode::average;
    avg.global = true;
    op::pooling mx = avg;
    mx.mode = op::pooling_mode::max;
    std::vector<double> mean, most;
    for (std::size_t plane = 0; plane < 6; ++plane) {
        auto b = xv.begin() + static_cast<std::ptrdiff_t>(plane * 20);
        double s = 0;
        for (auto it = b; it != b + 20; ++it) s += *it;
        mean.push_back(s / 20);
        most.push_back(*std::max_element(b, b + 20));
    }
    auto y = run(avg, {x});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{2, 3, 1, 1}));
    expect_near(y, mean);
    expect_near(run(mx, {x}), most, 0, 0);
    // 1-D: a sliding max over 3 with stride 2.
    auto x1 = make_arg(type::float32, {1, 1, 7}, std::vector<float>{1, 5, 2, 7, 3, 0.5f, 4});
    op::pooling p1;
    p1.lengths = {3};
    p1.stride = {2};
    expect_near(run(p1, {x1}), {5, 7, 4});
    // 3-D: the average of a 2x2x2 cube.
    auto x3 = random_arg(type::float32, {1, 1, 2, 2, 2});
    op::pooling p3;
    p3.mode = op::pooling_mode::average;
    p3.lengths = {2, 2, 2};
    auto v3 = x3.to_vector<double>();
    double s3 = 0;
    for (double v : v3) s3 += v;
    expect_near(run(p3, {x3}), {s3 / 8});
}

TEST(ops_nn_pool, indices_and_unpool) {
    pool2d c{op::pooling_mode::max, {2, 2}, {2, 2}, {1, 1}, {0, 0, 0, 0}};
    lens_t xl{2, 2, 6, 4};
    auto x = random_arg(type::float32, xl);
    lens_t out;
    std::vector<std::int64_t> argmax;
    auto expected = naive_pool(c, xl, x.to_vector<double>(), out, &argmax);
    op::pooling_with_indices op;
    static_cast<op::pooling&>(op) = make_pool(c);
    auto r = run(op, {x});
    ASSERT_EQ(r.elements().size(), 2u);
    expect_near(r.elements()[0], expected, 0, 0);
    EXPECT_EQ(r.elements()[1].to_vector<std::int64_t>(), argmax);
    // Column-major storage order swaps the roles of H and W within each plane.
    op.storage_order = 1;
    auto col = run(op, {x}).elements()[1].to_vector<std::int64_t>();
    for (std::size_t i = 0; i < col.size(); ++i) {
        const std::int64_t plane = argmax[i] / 24, h = argmax[i] % 24 / 4, w = argmax[i] % 4;
        EXPECT_EQ(col[i], plane * 24 + w * 6 + h);
    }
    // Unpooling puts each maximum back where it came from; everything else is zero.
    op::max_unpool un;
    un.lengths = {2, 2};
    un.stride = {2, 2};
    auto back = run(un, {r.elements()[0], r.elements()[1]});
    EXPECT_EQ(back.get_shape().lens(), xl);
    auto bv = back.to_vector<double>();
    auto xv = x.to_vector<double>();
    for (std::size_t i = 0; i < bv.size(); ++i) {
        const bool kept = std::find(argmax.begin(), argmax.end(), static_cast<std::int64_t>(i)) != argmax.end();
        EXPECT_EQ(bv[i], kept ? xv[i] : 0.0) << i;
    }
}

TEST(ops_nn_pool, unpool_to_larger_output_keeps_coordinates) {
    auto x = make_arg(type::float32, {1, 1, 2, 2}, std::vector<float>{5, 6, 7, 8});
    auto idx = make_arg(type::int64, {1, 1, 2, 2}, std::vector<std::int64_t>{5, 7, 13, 15});
    auto size = make_arg(type::int64, {4}, std::vector<std::int64_t>{1, 1, 5, 5});
    op::max_unpool un;
    un.lengths = {2, 2};
    un.stride = {2, 2};
    EXPECT_TRUE(shape_of(un, {x, idx, size}).dynamic());
    host_context ctx;
    auto y = un.compute(shape_of(un, {x, idx, size}), {x, idx, size});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{1, 1, 5, 5}));
    std::vector<double> want(25, 0.0);
    want[6] = 5;
    want[8] = 6;
    want[16] = 7;
    want[18] = 8;
    expect_near(y, want, 0, 0);
    auto bad = make_arg(type::int64, {1, 1, 2, 2}, std::vector<std::int64_t>{5, 7, 13, 16});
    EXPECT_THROW(un.compute(shape_of(un, {x, bad}), {x, bad}), error);
}

TEST(ops_nn_pool, errors) {
    op::pooling op;
    op.lengths = {3, 3};
    expect_shape_error(op, {shape(type::float32, {1, 1, 2, 5})}, error_code::shape);  // window too large
    expect_shape_error(op, {shape(type::float32, {1, 5})}, error_code::shape);
    expect_shape_error(op, {shape(type::int32, {1, 1, 5, 5})}, error_code::type);
    op.mode = op::pooling_mode::average;
    expect_shape_error(op, {shape(type::int8, {1, 1, 5, 5})}, error_code::type);
    op.lengths = {3};
    expect_shape_error(op, {shape(type::float32, {1, 1, 5, 5})}, error_code::shape);
}

TEST(ops_nn_pool, indices_with_dynamic_batch) {
    op::pooling_with_indices p;
    p.lengths = {2, 2};
    p.stride = {2, 2};
    operation op = p;
    auto x = shape::make_dynamic(type::float32, {{1, 8, {}}, {3, 3, {}}, {6, 6, {}}, {4, 4, {}}});
    auto s = op.compute_shape({x});
    ASSERT_TRUE(s.is_tuple());
    for (std::size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(s.sub_shapes()[i].get_type(), i == 0 ? type::float32 : type::int64);
        EXPECT_EQ(s.sub_shapes()[i].dyn_dims()[0], (dynamic_dimension{1, 8, {}}));
        EXPECT_EQ(s.sub_shapes()[i].dyn_dims()[2], (dynamic_dimension{3, 3, {}}));
    }
    // compute does not rely on the (dynamic) shape it is handed.
    auto xa = random_arg(type::float32, {2, 3, 6, 4});
    host_context ctx;
    auto r = op.compute(ctx, s, {xa});
    EXPECT_EQ(r.elements()[1].get_shape(), shape(type::int64, {2, 3, 3, 2}));
}
