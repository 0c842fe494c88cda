// resize (nearest, linear, cubic, antialias, tf_crop_and_resize, aspect policies),
// depth_to_space, space_to_depth and col2im against closed-form references.
#include "ops/tensor_layout.hpp"
#include "ops/tensor_resize.hpp"
#include "tensor_test_util.hpp"

#include <cmath>

using namespace kiln;
using namespace kiln::test;

namespace {
op::resize_options opts(const std::string& mode, const std::string& ctm) {
    op::resize_options o;
    o.mode = mode;
    o.coordinate_transformation_mode = ctm;
    return o;
}
double at_clamped(const std::vector<double>& v, std::int64_t i) {
    auto n = static_cast<std::int64_t>(v.size());
    return v[static_cast<std::size_t>(std::clamp<std::int64_t>(i, 0, n - 1))];
}
}  // namespace

TEST(ops_tensor_resize, nearest_asymmetric_repeats) {
    auto x = random_arg(type::float32, {1, 1, 2, 3}, 51);
    auto v = values(x);
    auto o = opts("nearest", "asymmetric");
    o.nearest_mode = "floor";
    std::vector<double> e;
    for (std::size_t r = 0; r < 4; ++r)
        for (std::size_t c = 0; c < 9; ++c) e.push_back(v[(r / 2) * 3 + c / 3]);
    for (bool compile : {false, true})
        expect_values(run_op(op::resize{o, {1, 1, 2, 3}, {}}, {x}, compile).outputs[0], {1, 1, 4, 9}, e);
    // Sizes on two axes give the same result.
    o.axes = {2, 3};
    expect_values(run_op(op::resize{o, {}, {4, 9}}, {x}).outputs[0], {1, 1, 4, 9}, e);
}

TEST(ops_tensor_resize, linear_align_corners_1d) {
    auto x = random_arg(type::float32, {5}, 52);
    auto v = values(x);
    std::vector<double> e;
    for (std::size_t i = 0; i < 8; ++i) {
        double xs = static_cast<double>(i) * 4.0 / 7.0;
        auto f = static_cast<std::int64_t>(std::floor(xs));
        double t = xs - static_cast<double>(f);
        e.push_back((1 - t) * at_clamped(v, f) + t * at_clamped(v, f + 1));
    }
    expect_values(run_op(op::resize{opts("linear", "align_corners"), {}, {8}}, {x}).outputs[0], {8}, e, 1e-5);
}

TEST(ops_tensor_resize, bilinear_half_pixel_2d) {
    auto x = random_arg(type::float32, {3, 4}, 53);
    auto v = values(x);
    const double sy = 5.0 / 3.0, sx = 1.5;
    auto src = [](std::size_t o, double s) { return (static_cast<double>(o) + 0.5) / s - 0.5; };
    std::vector<double> e;
    for (std::size_t r = 0; r < 5; ++r)
        for (std::size_t c = 0; c < 6; ++c) {
            double y = std::clamp(src(r, sy), 0.0, 2.0), xx = std::clamp(src(c, sx), 0.0, 3.0);
            auto y0 = static_cast<std::size_t>(std::floor(y)), x0 = static_cast<std::size_t>(std::floor(xx));
            auto y1 = std::min<std::size_t>(y0 + 1, 2), x1 = std::min<std::size_t>(x0 + 1, 3);
            double ty = y - static_cast<double>(y0), tx = xx - static_cast<double>(x0);
            e.push_back((1 - ty) * ((1 - tx) * v[y0 * 4 + x0] + tx * v[y0 * 4 + x1]) +
                        ty * ((1 - tx) * v[y1 * 4 + x0] + tx * v[y1 * 4 + x1]));
        }
    expect_values(run_op(op::resize{opts("linear", "half_pixel"), {}, {5, 6}}, {x}).outputs[0], {5, 6}, e, 1e-5);
    // The run-time form (sizes read while running) agrees.
    expect_values(run_op(op::resize_dynamic{opts("linear", "half_pixel"), false, true}, {x, make_ints({5, 6})}).outputs[0],
                  {5, 6}, e, 1e-5);
}

TEST(ops_tensor_resize, cubic_matches_keys_kernel) {
    auto x = random_arg(type::float64, {6}, 54);
    auto v = values(x);
    const double A = -0.5;
    auto w = [&](double d) {
        d = std::fabs(d);
        if (d <= 1) return (A + 2) * d * d * d - (A + 3) * d * d + 1;
        if (d < 2) return A * d * d * d - 5 * A * d * d + 8 * A * d - 4 * A;
        return 0.0;
    };
    std::vector<double> e;
    for (std::size_t i = 0; i < 9; ++i) {
        double xs = (static_cast<double>(i) + 0.5) / 1.5 - 0.5;
        auto f = static_cast<std::int64_t>(std::floor(xs));
        double sum = 0;
        for (std::int64_t k = f - 1; k <= f + 2; ++k) sum += w(xs - static_cast<double>(k)) * at_clamped(v, k);
        e.push_back(sum);
    }
    auto o = opts("cubic", "half_pixel");
    o.cubic_coeff_a = A;
    expect_values(run_op(op::resize{o, {1.5}, {}}, {x}).outputs[0], {9}, e, 1e-9);
}

TEST(ops_tensor_resize, antialias_linear_halving_is_a_triangle_filter) {
    auto x = random_arg(type::float64, {8}, 55);
    auto v = values(x);
    std::vector<double> e;
    for (std::int64_t i = 0; i < 4; ++i)
        e.push_back((0.25 * at_clamped(v, 2 * i - 1) + 0.75 * at_clamped(v, 2 * i) + 0.75 * at_clamped(v, 2 * i + 1) +
                     0.25 * at_clamped(v, 2 * i + 2)) /
                    2.0);
    auto o = opts("linear", "half_pixel");
    o.antialias = true;
    expect_values(run_op(op::resize{o, {0.5}, {}}, {x}).outputs[0], {4}, e, 1e-12);
}

TEST(ops_tensor_resize, tf_crop_and_resize_extrapolates) {
    auto x = make_arg(type::float32, {3}, {1, 2, 3});
    auto o = opts("linear", "tf_crop_and_resize");
    o.extrapolation_value = 10;
    // roi [0.5, 1.5]: source = 0.5*2 + i * 1.0 * 2 / 2 -> 1, 2, 3(outside)
    auto roi = make_arg(type::float32, {2}, {0.5, 1.5});
    expect_values(run_op(op::resize{o, {}, {3}}, {x, roi}).outputs[0], {3}, {2, 3, 10});
}

TEST(ops_tensor_resize, tf_half_pixel_for_nn) {
    auto x = make_arg(type::float32, {3}, {10, 20, 30});
    // source = (x + 0.5) / 2: 0.25, 0.75, 1.25, 1.75, 2.25, 2.75 -> rounded, clamped.
    expect_values(run_op(op::resize{opts("nearest", "tf_half_pixel_for_nn"), {2.0}, {}}, {x}).outputs[0], {6},
                  {10, 20, 20, 30, 30, 30});
}

TEST(ops_tensor_resize, keep_aspect_ratio_policies) {
    op::resize_options o;
    o.axes = {0, 1};
    o.keep_aspect_ratio_policy = "not_larger";
    auto g = op::resize_shape(o, {4, 8}, {}, {2, 2}, "t");
    EXPECT_EQ(g.out, (std::vector<std::size_t>{1, 2}));
    o.keep_aspect_ratio_policy = "not_smaller";
    g = op::resize_shape(o, {4, 8}, {}, {2, 2}, "t");
    EXPECT_EQ(g.out, (std::vector<std::size_t>{2, 4}));
    EXPECT_DOUBLE_EQ(g.scales[1], 0.5);
    EXPECT_THROW(op::resize_shape(o, {4, 8}, {}, {2}, "t"), error);
    o.mode = "bicubic";
    EXPECT_THROW(o.validate("t"), error);
}

TEST(ops_tensor_layout, depth_to_space_modes_and_inverse) {
    const std::size_t n = 1, c = 8, h = 2, w = 3, b = 2;
    auto x = random_arg(type::float32, {n, c, h, w}, 56);
    auto v = values(x);
    for (std::string mode : {"DCR", "CRD"}) {
        std::vector<double> e;
        for (std::size_t oc = 0; oc < c / 4; ++oc)
            for (std::size_t y = 0; y < h * b; ++y)
                for (std::size_t xx = 0; xx < w * b; ++xx) {
                    std::size_t bi = y % b, bj = xx % b;
                    std::size_t ic = mode == "DCR" ? (bi * b + bj) * (c / 4) + oc : oc * 4 + bi * b + bj;
                    e.push_back(v[(ic * h + y / b) * w + xx / b]);
                }
        expect_values(run_op(op::depth_to_space{2, mode}, {x}).outputs[0], {1, 2, 4, 6}, e);
    }
    // space_to_depth undoes DCR depth_to_space.
    program p;
    auto* m = p.get_main_module();
    auto in = m->add_parameter("x", x.get_shape());
    auto d = m->add_instruction(op::depth_to_space{2, "DCR"}, {in});
    m->add_return({m->add_instruction(op::space_to_depth{2}, {d})});
    p.compile(*get_target("ref"));
    EXPECT_EQ(p.eval({{"x", x}})[0], x);
    EXPECT_THROW((op::depth_to_space{3, "DCR"}.compute_shape({x.get_shape()})), error);
}

// A channels-last convolution result comes in place (cpu's 1x1-convolution form of a
// transposed convolution), and Mask R-CNN's RoI count is known only at run time.
TEST(ops_tensor_layout, depth_to_space_reads_channels_last_and_takes_a_run_time_batch) {
    const std::size_t n = 2, c = 8, h = 3, w = 4;
    auto x = random_arg(type::float32, {n, c, h, w}, 58);
    auto v = values(x);
    argument nhwc(shape(type::float32, {n, c, h, w}, {h * w * c, 1, w * c, c}));
    float* p = nhwc.data_as<float>();
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t ch = 0; ch < c; ++ch)
            for (std::size_t y = 0; y < h; ++y)
                for (std::size_t xx = 0; xx < w; ++xx)
                    p[i * h * w * c + (y * w + xx) * c + ch] = static_cast<float>(v[((i * c + ch) * h + y) * w + xx]);
    for (std::string mode : {"DCR", "CRD"}) {
        op::depth_to_space d{2, mode};
        auto out = d.compute_shape({x.get_shape()});
        EXPECT_EQ(d.compute(out, {nhwc}), d.compute(out, {x})) << mode;
    }
    op::depth_to_space d{2, "CRD"};
    auto dyn = d.compute_shape({shape::make_dynamic(type::float32, {{0, 64, {}}, {8, 8, {}}, {3, 3, {}}, {1, 10, {}}})});
    ASSERT_TRUE(dyn.dynamic());
    EXPECT_EQ(dyn.dyn_dims()[0], (dynamic_dimension{0, 64, {}}));
    EXPECT_EQ(dyn.dyn_dims()[1], (dynamic_dimension{2, 2, {}}));
    EXPECT_EQ(dyn.dyn_dims()[2], (dynamic_dimension{6, 6, {}}));
    EXPECT_EQ(dyn.dyn_dims()[3], (dynamic_dimension{2, 20, {}}));
    EXPECT_EQ(d.compute(dyn, {x}), d.compute(d.compute_shape({x.get_shape()}), {x}));
    // Channels must be fixed (and divisible by blocksize^2) to give the output's.
    EXPECT_THROW((d.compute_shape({shape::make_dynamic(type::float32, {{1, 1, {}}, {4, 8, {}}, {3, 3, {}}, {3, 3, {}}})})),
                 error);
}

TEST(ops_tensor_layout, col2im_sums_overlapping_blocks) {
    // Image 4x5, block 2x3, stride 1x2, dilation 1x1, pads 1,0,0,1 (top, left, bottom, right).
    std::vector<std::int64_t> image{4, 5}, block{2, 3}, strides{1, 2}, pads{1, 0, 0, 1};
    std::size_t bh = (4 + 1 + 0 - 2) / 1 + 1, bw = (5 + 0 + 1 - 3) / 2 + 1;  // blocks per dim
    auto x = random_arg(type::float32, {1, 2 * 6, bh * bw}, 57);
    auto v = values(x);
    std::vector<double> e(2 * 20, 0);
    for (std::size_t ch = 0; ch < 2; ++ch)
        for (std::size_t ki = 0; ki < 2; ++ki)
            for (std::size_t kj = 0; kj < 3; ++kj)
                for (std::size_t by = 0; by < bh; ++by)
                    for (std::size_t bx = 0; bx < bw; ++bx) {
                        auto y = static_cast<std::int64_t>(by + ki) - 1;
                        auto xx = static_cast<std::int64_t>(bx * 2 + kj);
                        if (y < 0 || y >= 4 || xx >= 5) continue;
                        e[ch * 20 + static_cast<std::size_t>(y * 5 + xx)] += v[((ch * 6 + ki * 3 + kj) * bh + by) * bw + bx];
                    }
    op::col2im c{image, block, {}, pads, strides};
    expect_values(run_op(c, {x}).outputs[0], {1, 2, 4, 5}, e, 1e-5);
    expect_values(run_op(op::col2im_dynamic{{}, pads, strides}, {x, make_ints(image), make_ints(block)}).outputs[0],
                  {1, 2, 4, 5}, e, 1e-5);
    EXPECT_THROW((op::col2im{image, block, {}, {}, {}}.compute_shape({x.get_shape()})), error);
}
