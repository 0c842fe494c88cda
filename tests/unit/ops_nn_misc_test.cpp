// einsum, det, grid_sample, affine_grid, roi_align and nonmax_suppression.
#include "ops/nn_detection.hpp"
#include "ops/nn_einsum.hpp"
#include "ops/nn_grid.hpp"
#include "ops_nn_helpers.hpp"

using namespace kiln;
using namespace kiln::test_nn;
using lens_t = std::vector<std::size_t>;

namespace {
argument run_einsum(const std::string& eq, const std::vector<argument>& args) { return run(op::einsum{eq}, args); }
}  // namespace

TEST(ops_nn_misc, einsum_products) {
    auto a = random_arg(type::float32, {3, 4}), b = random_arg(type::float32, {4, 5});
    auto av = a.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> mm;
    for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t k = 0; k < 5; ++k) {
            double s = 0;
            for (std::size_t j = 0; j < 4; ++j) s += av[i * 4 + j] * bv[j * 5 + k];
            mm.push_back(s);
        }
    auto y = run_einsum("ij,jk->ik", {a, b});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{3, 5}));
    expect_near(y, mm);
    expect_near(run_einsum("ij, jk", {a, b}), mm);  // implicit output, spaces ignored
    // Transposes: explicit, and implicit alphabetical order.
    std::vector<double> at;
    for (std::size_t j = 0; j < 4; ++j)
        for (std::size_t i = 0; i < 3; ++i) at.push_back(av[i * 4 + j]);
    expect_near(run_einsum("ij->ji", {a}), at, 0, 0);
    expect_near(run_einsum("ba", {a}), at, 0, 0);
    // Sum of everything, and a dot product to a scalar.
    double total = 0;
    for (double v : av) total += v;
    auto s = run_einsum("ij->", {a});
    EXPECT_EQ(s.get_shape().ndim(), 0u);
    expect_near(s, {total});
    auto v = random_arg(type::float64, {6});
    auto vv = v.to_vector<double>();
    double dot = 0;
    for (double e : vv) dot += e * e;
    expect_near(run_einsum("i,i", {v, v}), {dot}, 1e-12, 1e-12);
}

TEST(ops_nn_misc, einsum_diagonal_ellipsis_and_ints) {
    auto m = random_arg(type::float32, {4, 4});
    auto mv = m.to_vector<double>();
    expect_near(run_einsum("ii->i", {m}), {mv[0], mv[5], mv[10], mv[15]}, 0, 0);
    expect_near(run_einsum("ii", {m}), {mv[0] + mv[5] + mv[10] + mv[15]});
    // Batched products with broadcast "..." dims: (2, 1, 3, 4) x (5, 4, 2) -> (2, 5, 3, 2).
    auto a = random_arg(type::float32, {2, 1, 3, 4}), b = random_arg(type::float32, {5, 4, 2});
    auto av = a.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> want;
    for (std::size_t p = 0; p < 2; ++p)
        for (std::size_t q = 0; q < 5; ++q)
            for (std::size_t i = 0; i < 3; ++i)
                for (std::size_t k = 0; k < 2; ++k) {
                    double acc = 0;
                    for (std::size_t j = 0; j < 4; ++j) acc += av[(p * 3 + i) * 4 + j] * bv[(q * 4 + j) * 2 + k];
                    want.push_back(acc);
                }
    auto y = run_einsum("...ij,...jk->...ik", {a, b});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{2, 5, 3, 2}));
    expect_near(y, want);
    // Implicit output drops labels used twice: 'bij,bjk' sums over b and j.
    auto c = random_arg(type::float32, {2, 3, 4}), d = random_arg(type::float32, {2, 4, 2});
    auto cv = c.to_vector<double>(), dv = d.to_vector<double>();
    std::vector<double> ik(6, 0.0);
    for (std::size_t bb = 0; bb < 2; ++bb)
        for (std::size_t i = 0; i < 3; ++i)
            for (std::size_t k = 0; k < 2; ++k)
                for (std::size_t j = 0; j < 4; ++j) ik[i * 2 + k] += cv[(bb * 3 + i) * 4 + j] * dv[(bb * 4 + j) * 2 + k];
    expect_near(run_einsum("bij,bjk", {c, d}), ik);
    auto n = make_arg(type::int32, {2, 2}, std::vector<int>{1, 2, 3, 4});
    EXPECT_EQ(run_einsum("ij,jk->ik", {n, n}).to_vector<int>(), (std::vector<int>{7, 10, 15, 22}));
    EXPECT_EQ(run_einsum("ij,jk->ik", {n, n}).get_shape().get_type(), type::int32);
}

TEST(ops_nn_misc, einsum_errors) {
    shape a(type::float32, {2, 3}), b(type::float32, {4, 5});
    expect_shape_error(op::einsum{"ij,jk->ik"}, {a, b}, error_code::shape);  // j: 3 vs 4
    expect_shape_error(op::einsum{"ij,jk->ik"}, {a}, error_code::shape);     // one input for two terms
    expect_shape_error(op::einsum{"ijk->i"}, {a}, error_code::shape);        // rank
    expect_shape_error(op::einsum{"ij->iz"}, {a}, error_code::shape);        // z not an input label
    expect_shape_error(op::einsum{"i1->i"}, {shape(type::float32, {2, 2})}, error_code::shape);
    expect_shape_error(op::einsum{"ij->ii"}, {a}, error_code::shape);
}

TEST(ops_nn_misc, det) {
    auto m = make_arg(type::float32, {3, 2, 2}, std::vector<float>{1, 2, 3, 4, 2, 0, 0, 3, 1, 2, 2, 4});
    expect_near(run(op::det{}, {m}), {-2, 6, 0});
    auto r = random_arg(type::float64, {2, 3, 3});
    auto v = r.to_vector<double>();
    std::vector<double> want;
    for (std::size_t b = 0; b < 2; ++b) {
        const double* a = v.data() + b * 9;
        want.push_back(a[0] * (a[4] * a[8] - a[5] * a[7]) - a[1] * (a[3] * a[8] - a[5] * a[6]) +
                       a[2] * (a[3] * a[7] - a[4] * a[6]));
    }
    auto y = run(op::det{}, {r});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{2}));
    expect_near(y, want, 1e-12, 1e-12);
    expect_shape_error(op::det{}, {shape(type::float32, {2, 3})}, error_code::shape);
    expect_shape_error(op::det{}, {shape(type::int32, {2, 2})}, error_code::type);
}

namespace {

// A grid (N=1, H, W, 2) hitting pixel (i, j) exactly, for align_corners = 1.
argument pixel_grid(std::size_t h, std::size_t w) {
    std::vector<float> g;
    for (std::size_t i = 0; i < h; ++i)
        for (std::size_t j = 0; j < w; ++j) {
            g.push_back(-1.0f + 2.0f * float(j) / float(w - 1));
            g.push_back(-1.0f + 2.0f * float(i) / float(h - 1));
        }
    return make_arg(type::float32, {1, h, w, 2}, g);
}

}  // namespace

TEST(ops_nn_misc, grid_sample_identity_every_mode) {
    auto x = random_arg(type::float32, {1, 2, 4, 5});
    for (auto mode : {op::grid_mode::linear, op::grid_mode::nearest, op::grid_mode::cubic}) {
        op::grid_sample op{mode, op::grid_padding::zeros, true};
        expect_near(run(op, {x, pixel_grid(4, 5)}), x.to_vector<double>(), 1e-5, 1e-6);
    }
    // Volumetric: (x, y, z) pick (w, h, d).
    auto v = random_arg(type::float32, {1, 1, 2, 3, 2});
    std::vector<float> g;
    for (int d = 0; d < 2; ++d)
        for (int h = 0; h < 3; ++h)
            for (int w = 0; w < 2; ++w) g.insert(g.end(), {-1.0f + 2.0f * float(w), -1.0f + float(h), -1.0f + 2.0f * float(d)});
    op::grid_sample vol{op::grid_mode::linear, op::grid_padding::zeros, true};
    expect_near(run(vol, {v, make_arg(type::float32, {1, 2, 3, 2, 3}, g)}), v.to_vector<double>(), 1e-5, 1e-6);
}

TEST(ops_nn_misc, grid_sample_bilinear_and_padding) {
    const std::size_t h = 3, w = 4;
    auto x = random_arg(type::float32, {1, 1, h, w});
    auto xv = x.to_vector<double>();
    auto gv = random_values(2 * 6, 1.3f);
    auto grid = make_arg(type::float32, {1, 2, 3, 2}, gv);
    auto pixel = [&](long i, long j) { return i < 0 || j < 0 || i >= long(h) || j >= long(w) ? 0.0 : xv[i * w + j]; };
    std::vector<double> want;
    for (std::size_t p = 0; p < 6; ++p) {
        // align_corners = 0: -1 and 1 are the outer edges of the border pixels.
        const double px = ((gv[2 * p] + 1.0) * w - 1.0) / 2.0, py = ((gv[2 * p + 1] + 1.0) * h - 1.0) / 2.0;
        const long j0 = long(std::floor(px)), i0 = long(std::floor(py));
        const double fx = px - double(j0), fy = py - double(i0);
        want.push_back((1 - fy) * ((1 - fx) * pixel(i0, j0) + fx * pixel(i0, j0 + 1)) +
                       fy * ((1 - fx) * pixel(i0 + 1, j0) + fx * pixel(i0 + 1, j0 + 1)));
    }
    expect_near(run(op::grid_sample{}, {x, grid}), want);
    // Far outside: border takes the edge pixel, zeros gives 0, reflection folds back inside.
    auto far = make_arg(type::float32, {1, 1, 1, 2}, std::vector<float>{5.0f, -7.0f});
    op::grid_sample border{op::grid_mode::nearest, op::grid_padding::border, false};
    expect_near(run(border, {x, far}), {xv[w - 1]});
    op::grid_sample zeros{op::grid_mode::linear, op::grid_padding::zeros, false};
    expect_near(run(zeros, {x, far}), {0.0});
    // align_corners = 1 on W = 4: x = 1 + 2/3 is pixel 4, which reflects to pixel 2.
    auto refl_grid = make_arg(type::float32, {1, 1, 1, 2}, std::vector<float>{1.0f + 2.0f / 3.0f, -1.0f});
    op::grid_sample refl{op::grid_mode::nearest, op::grid_padding::reflection, true};
    expect_near(run(refl, {x, refl_grid}), {xv[2]});
    expect_shape_error(op::grid_sample{}, {x.get_shape(), shape(type::float32, {1, 2, 3, 3})}, error_code::shape);
}

TEST(ops_nn_misc, affine_grid_identity_and_shift) {
    auto x = random_arg(type::float32, {2, 3, 4, 5});
    auto xv = x.to_vector<double>();
    auto identity = make_arg(type::float32, {2, 2, 3}, std::vector<float>{1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0});
    for (bool ac : {false, true}) {
        op::affine_grid ag{ac, {2, 3, 4, 5}};
        auto grid = run(ag, {identity});
        EXPECT_EQ(grid.get_shape().lens(), (lens_t{2, 4, 5, 2}));
        expect_near(run(op::grid_sample{op::grid_mode::linear, op::grid_padding::zeros, ac}, {x, grid}), xv, 1e-5, 1e-6);
    }
    // Shifting x by one pixel (2 / W in normalized units) moves every column left by one.
    auto shift = make_arg(type::float32, {2, 2, 3}, std::vector<float>{1, 0, 0.4f, 0, 1, 0, 1, 0, 0.4f, 0, 1, 0});
    auto size = make_arg(type::int64, {4}, std::vector<std::int64_t>{2, 3, 4, 5});
    op::affine_grid runtime_size;
    EXPECT_TRUE(shape_of(runtime_size, {shift, size}).dynamic());
    host_context ctx;
    auto grid = runtime_size.compute(shape_of(runtime_size, {shift, size}), {shift, size});
    EXPECT_EQ(grid.get_shape().lens(), (lens_t{2, 4, 5, 2}));
    std::vector<double> want;
    for (std::size_t i = 0; i < xv.size(); ++i) want.push_back(i % 5 == 4 ? 0.0 : xv[i + 1]);
    expect_near(run(op::grid_sample{}, {x, grid}), want, 1e-5, 1e-5);
    op::affine_grid bad{false, {2, 3, 4, 5, 6}};
    expect_shape_error(bad, {identity.get_shape()}, error_code::shape);
}

TEST(ops_nn_misc, roi_align_on_a_linear_ramp) {
    // Bilinear sampling is exact on f(y, x) = 2y + 3x + 1, so each bin's average is f at
    // the bin's center.
    const std::size_t h = 8, w = 8;
    std::vector<float> img;
    for (std::size_t c = 0; c < 2; ++c)
        for (std::size_t i = 0; i < h; ++i)
            for (std::size_t j = 0; j < w; ++j) img.push_back(float(2 * i + 3 * j + 1 + 10 * c));
    auto x = make_arg(type::float32, {1, 2, h, w}, img);
    auto rois = make_arg(type::float32, {1, 4}, std::vector<float>{1, 1, 5, 4});
    auto idx = make_arg(type::int64, {1}, std::vector<std::int64_t>{0});
    op::roi_align op;
    op.output_height = 3;
    op.output_width = 2;
    op.sampling_ratio = 2;
    std::vector<double> want;
    for (std::size_t c = 0; c < 2; ++c)
        for (std::size_t ph = 0; ph < 3; ++ph)
            for (std::size_t pw = 0; pw < 2; ++pw) {
                // half_pixel: the roi spans [0.5, 4.5] x [0.5, 3.5].
                const double cy = 0.5 + (double(ph) + 0.5) * 1.0, cx = 0.5 + (double(pw) + 0.5) * 2.0;
                want.push_back(2 * cy + 3 * cx + 1 + 10 * double(c));
            }
    auto y = run(op, {x, rois, idx});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{1, 2, 3, 2}));
    expect_near(y, want);
    // Max mode with one sample per bin at an integer position reads that pixel.
    op.max_mode = true;
    op.sampling_ratio = 1;
    op.output_height = op.output_width = 2;
    auto r2 = make_arg(type::float32, {1, 4}, std::vector<float>{0.5f, 0.5f, 4.5f, 4.5f});
    std::vector<double> want_max;
    for (std::size_t c = 0; c < 2; ++c)
        for (std::size_t ph = 0; ph < 2; ++ph)
            for (std::size_t pw = 0; pw < 2; ++pw) want_max.push_back(2 * (1.0 + 2 * ph) + 3 * (1.0 + 2 * pw) + 1 + 10 * c);
    expect_near(run(op, {x, r2, idx}), want_max);
    expect_shape_error(op, {x.get_shape(), shape(type::float32, {1, 5}), idx.get_shape()}, error_code::shape);
}

TEST(ops_nn_misc, nonmax_suppression) {
    // Box 1 overlaps box 0 (IoU 0.82), box 3 is box 2 with flipped corners.
    auto boxes = make_arg(type::float32, {1, 4, 4}, std::vector<float>{0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3, 1, 3, 0, 2});
    auto scores = make_arg(type::float32, {1, 1, 4}, std::vector<float>{0.9f, 0.95f, 0.5f, 0.3f});
    auto max_out = make_arg(type::int64, {1}, std::vector<std::int64_t>{3});
    auto iou = make_arg(type::float32, {1}, std::vector<float>{0.5f});
    op::nonmax_suppression op{false, true, true, false};
    auto out = shape_of(op, {boxes, scores, max_out, iou});
    EXPECT_TRUE(out.dynamic());
    host_context ctx;
    auto y = op.compute(out, {boxes, scores, max_out, iou});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{2, 3}));
    EXPECT_EQ(y.to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 1, 0, 0, 2}));
    // A looser IoU threshold keeps box 0; max_output 1 keeps only the best; a score
    // threshold drops low scores.
    auto loose = make_arg(type::float32, {1}, std::vector<float>{0.9f});
    EXPECT_EQ(op.compute(out, {boxes, scores, max_out, loose}).to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{0, 0, 1, 0, 0, 0, 0, 0, 2}));
    auto one = make_arg(type::int64, {1}, std::vector<std::int64_t>{1});
    EXPECT_EQ(op.compute(out, {boxes, scores, one, iou}).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 0, 1}));
    op::nonmax_suppression thr{false, true, true, true};
    auto st = make_arg(type::float32, {1}, std::vector<float>{0.92f});
    EXPECT_EQ(thr.compute(out, {boxes, scores, max_out, loose, st}).to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{0, 0, 1}));
    // Center format (x, y, w, h) describing the same boxes gives the same answer.
    auto centers = make_arg(type::float32, {1, 4, 4},
                            std::vector<float>{0.5f, 0.5f, 1, 1, 0.6f, 0.5f, 1, 1, 2.5f, 0.5f, 1, 1, 2.5f, 0.5f, 1, 1});
    op::nonmax_suppression center{true, true, true, false};
    EXPECT_EQ(center.compute(out, {centers, scores, max_out, iou}).to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{0, 0, 1, 0, 0, 2}));
    // Without max_output_boxes_per_class nothing is selected.
    op::nonmax_suppression none;
    EXPECT_EQ(none.compute(out, {boxes, scores}).get_shape().lens(), (lens_t{0, 3}));
    expect_shape_error(op, {shape(type::float32, {1, 4, 3}), scores.get_shape(), max_out.get_shape(), iou.get_shape()},
                       error_code::shape);
}

// Detection heads inside If branches (torchvision's Faster R-CNN, SSD) see box counts known
// only at run time: their shapes are ranges, checked where fixed and at run time otherwise.
TEST(ops_nn_misc, detection_heads_take_dynamic_box_counts) {
    const dynamic_dimension boxes_n{0, dynamic_dimension::unbounded, {}};
    const dynamic_dimension one{1, 1, {}}, four{4, 4, {}};
    operation nms = op::nonmax_suppression{false, true, true, false};
    const shape scalar_i(type::int64, {1}), scalar_f(type::float32, {1});
    auto boxes = shape::make_dynamic(type::float32, {one, boxes_n, four});
    auto scores = shape::make_dynamic(type::float32, {one, {3, 3, {}}, boxes_n});
    auto s = nms.compute_shape({boxes, scores, scalar_i, scalar_f});
    ASSERT_TRUE(s.dynamic());
    EXPECT_EQ(s.dyn_dims()[0], boxes_n);  // 1 x 3 x unbounded
    EXPECT_EQ(s.dyn_dims()[1], (dynamic_dimension{3, 3, {}}));
    // Bounded ranges bound the selection: B x C x N at most.
    auto bounded = nms.compute_shape({shape::make_dynamic(type::float32, {one, {0, 50, {}}, four}),
                                      shape::make_dynamic(type::float32, {one, {2, 2, {}}, {0, 50, {}}}), scalar_i,
                                      scalar_f});
    EXPECT_EQ(bounded.dyn_dims()[0], (dynamic_dimension{0, 100, {}}));
    // What is fixed is still checked: 3 coordinates, or box counts that differ.
    EXPECT_THROW(nms.compute_shape({shape::make_dynamic(type::float32, {one, boxes_n, {3, 3, {}}}), scores, scalar_i,
                                    scalar_f}),
                 error);
    EXPECT_THROW(nms.compute_shape({shape(type::float32, {1, 5, 4}), shape(type::float32, {1, 3, 6}), scalar_i,
                                    scalar_f}),
                 error);
    // At run time the real shapes are checked too.
    auto real_boxes = make_arg(type::float32, {1, 2, 4}, std::vector<float>{0, 0, 1, 1, 0, 2, 1, 3});
    auto bad_scores = make_arg(type::float32, {1, 1, 3}, std::vector<float>{0.9f, 0.5f, 0.1f});
    auto max_out = make_arg(type::int64, {1}, std::vector<std::int64_t>{5});
    auto iou = make_arg(type::float32, {1}, std::vector<float>{0.5f});
    host_context ctx;
    EXPECT_THROW(nms.compute(ctx, s, {real_boxes, bad_scores, max_out, iou}, {}, {}), error);
    auto good_scores = make_arg(type::float32, {1, 1, 2}, std::vector<float>{0.9f, 0.5f});
    EXPECT_EQ(nms.compute(ctx, s, {real_boxes, good_scores, max_out, iou}, {}, {}).to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{0, 0, 0, 0, 0, 1}));

    operation roi = op::roi_align{false, 7, 7, 2, 0.25f, true};
    auto r = roi.compute_shape({shape(type::float32, {1, 256, 20, 20}),
                                shape::make_dynamic(type::float32, {boxes_n, four}),
                                shape::make_dynamic(type::int64, {boxes_n})});
    ASSERT_TRUE(r.dynamic());
    EXPECT_EQ(r.dyn_dims()[0], boxes_n);
    EXPECT_EQ(r.max_lens(), (lens_t{dynamic_dimension::unbounded, 256, 7, 7}));
    EXPECT_THROW(roi.compute_shape({shape(type::float32, {1, 256, 20, 20}), shape(type::float32, {5, 4}),
                                    shape(type::int64, {6})}),
                 error);
}

TEST(ops_nn_misc, einsum_dynamic_dims) {
    const dynamic_dimension any{1, 32, {}};
    operation op = op::einsum{"bij,bjk->bik"};
    auto a = shape::make_dynamic(type::float32, {any, {3, 3, {}}, any});
    auto b = shape::make_dynamic(type::float32, {any, any, {6, 6, {}}});
    auto s = op.compute_shape({a, b});
    ASSERT_TRUE(s.dynamic());
    EXPECT_EQ(s.dyn_dims()[0], any);
    EXPECT_EQ(s.dyn_dims()[1], (dynamic_dimension{3, 3, {}}));
    EXPECT_EQ(s.dyn_dims()[2], (dynamic_dimension{6, 6, {}}));
    operation ell = op::einsum{"...ij->...ji"};
    auto e = ell.compute_shape({shape::make_dynamic(type::float32, {any, {2, 2, {}}, {4, 4, {}}})});
    EXPECT_EQ(e.dyn_dims()[0], any);
    EXPECT_EQ(e.dyn_dims()[1], (dynamic_dimension{4, 4, {}}));
    EXPECT_THROW(op.compute_shape({a, shape::make_dynamic(type::float32, {{2, 2, {}}, any, {6, 6, {}}}),
                                   shape(type::float32, {2})}),
                 error);
}
