#include "ops/nn_detection.hpp"

#include "ops/nms_box_grid.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::op {

namespace {
// Whether a dimension can be `n` (a fixed one is `n`; a range holds it).
bool can_be(const dynamic_dimension& d, std::size_t n) { return d.min <= n && n <= d.max; }
// Whether two dimensions can be equal (fixed ones must be; ranges are checked at run time).
bool can_match(const dynamic_dimension& a, const dynamic_dimension& b) {
    return !(a.is_fixed() && b.is_fixed()) || a.min == b.min;
}
// a * b, unbounded when either is or the product overflows.
std::size_t product_or_unbounded(std::size_t a, std::size_t b) {
    constexpr auto unbounded = dynamic_dimension::unbounded;
    if (a == unbounded || b == unbounded) return unbounded;
    if (a != 0 && b > (unbounded - 1) / a) return unbounded;
    return a * b;
}
}  // namespace

// Shapes may be dynamic (detection heads inside If branches, box counts known only at run
// time): each check holds for fixed dims and is left to run time for ranges.
shape roi_align::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 3);
    const auto& x = inputs[0];
    const auto& rois = inputs[1];
    const auto& idx = inputs[2];
    check_rank(name(), x, 4, 4, "input x");
    check_rank(name(), rois, 2, 2, "rois");
    check_rank(name(), idx, 1, 1, "batch_indices");
    if (!is_float_compute_type(x.get_type()) || rois.get_type() != x.get_type())
        throw_error(error_code::type, name() + ": x " + x.to_string() + " and rois " + rois.to_string() +
                                          " must share one floating-point type");
    if (!is_integer(idx.get_type()))
        throw_error(error_code::type, name() + ": batch_indices " + idx.to_string() + " must be integers");
    const auto xd = x.to_dynamic_dims(), rd = rois.to_dynamic_dims(), id = idx.to_dynamic_dims();
    if (!can_be(rd[1], 4) || !can_match(id[0], rd[0]))
        throw_error(error_code::shape, name() + ": rois " + rois.to_string() + " must be (R, 4) and batch_indices " +
                                           idx.to_string() + " (R)");
    if (output_height < 1 || output_width < 1)
        throw_error(error_code::shape, name() + ": output_height and output_width must be positive");
    const auto oh = static_cast<std::size_t>(output_height), ow = static_cast<std::size_t>(output_width);
    return shape::make_dynamic(x.get_type(), {rd[0], xd[1], {oh, oh, {}}, {ow, ow, {}}});
}

argument roi_align::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& xl = args[0].get_shape().lens();
    const auto batch = static_cast<std::int64_t>(xl[0]), channels = static_cast<std::int64_t>(xl[1]);
    const auto height = static_cast<std::int64_t>(xl[2]), width = static_cast<std::int64_t>(xl[3]);
    const std::size_t num_rois = args[1].get_shape().lens()[0];
    auto rois = read_as<double>(args[1]);
    auto batch_idx = read_as<std::int64_t>(args[2]);
    // One bilinear sample: the four corners' offsets in a plane and their weights (all zero
    // for a sample outside the map).
    struct sample {
        std::int64_t offset[4];
        double weight[4];
    };
    const std::int64_t bins = output_height * output_width;
    return visit_float_compute(args[0].get_shape().get_type(), name(), [&](auto tag) {
        using A = typename decltype(tag)::type;
        // float32 maps are read in place: converting every level's map to double cost more
        // than the pooling (Mask R-CNN).
        auto x = read_as<A>(args[0]);
        return produce<A>(out, [&](A* y) {
            std::vector<sample> samples;
            for (std::size_t n = 0; n < num_rois; ++n) {
                const std::int64_t b = batch_idx[n];
                if (b < 0 || b >= batch)
                    throw_error(error_code::runtime, name() + ": batch index " + std::to_string(b) +
                                                         " is outside [0, " + std::to_string(batch) + ")");
                const double shift = half_pixel ? 0.5 : 0.0;
                const double x0 = rois[n * 4 + 0] * spatial_scale - shift, y0 = rois[n * 4 + 1] * spatial_scale - shift;
                const double x1 = rois[n * 4 + 2] * spatial_scale - shift, y1 = rois[n * 4 + 3] * spatial_scale - shift;
                double roi_w = x1 - x0, roi_h = y1 - y0;
                if (!half_pixel) {
                    roi_w = std::max(roi_w, 1.0);
                    roi_h = std::max(roi_h, 1.0);
                }
                const double bin_h = roi_h / static_cast<double>(output_height);
                const double bin_w = roi_w / static_cast<double>(output_width);
                const auto grid_h = sampling_ratio > 0 ? sampling_ratio : static_cast<std::int64_t>(std::ceil(bin_h));
                const auto grid_w = sampling_ratio > 0 ? sampling_ratio : static_cast<std::int64_t>(std::ceil(bin_w));
                const std::int64_t per_bin = grid_h * grid_w;
                const double count = static_cast<double>(std::max<std::int64_t>(per_bin, 1));
                // Every bin's samples once per RoI (they are shared by every channel), bin-major.
                samples.clear();
                for (std::int64_t ph = 0; ph < output_height; ++ph)
                    for (std::int64_t pw = 0; pw < output_width; ++pw)
                        for (std::int64_t iy = 0; iy < grid_h; ++iy) {
                            const double sy = y0 + static_cast<double>(ph) * bin_h +
                                              (static_cast<double>(iy) + 0.5) * bin_h / static_cast<double>(grid_h);
                            for (std::int64_t ix = 0; ix < grid_w; ++ix) {
                                const double sx = x0 + static_cast<double>(pw) * bin_w +
                                                  (static_cast<double>(ix) + 0.5) * bin_w / static_cast<double>(grid_w);
                                sample s{{0, 0, 0, 0}, {0, 0, 0, 0}};
                                if (sy >= -1.0 && sy <= static_cast<double>(height) && sx >= -1.0 &&
                                    sx <= static_cast<double>(width)) {
                                    double yy = std::max(sy, 0.0), xx = std::max(sx, 0.0);
                                    auto ylo = static_cast<std::int64_t>(yy), xlo = static_cast<std::int64_t>(xx);
                                    std::int64_t yhi = ylo + 1, xhi = xlo + 1;
                                    if (ylo >= height - 1) {
                                        ylo = yhi = height - 1;
                                        yy = static_cast<double>(ylo);
                                    }
                                    if (xlo >= width - 1) {
                                        xlo = xhi = width - 1;
                                        xx = static_cast<double>(xlo);
                                    }
                                    const double ly = yy - static_cast<double>(ylo), lx = xx - static_cast<double>(xlo);
                                    const double hy = 1.0 - ly, hx = 1.0 - lx;
                                    s = {{ylo * width + xlo, ylo * width + xhi, yhi * width + xlo, yhi * width + xhi},
                                         {hy * hx, hy * lx, ly * hx, ly * lx}};
                                }
                                samples.push_back(s);
                            }
                        }
                // Channel-outer: one plane stays in cache while all its bins are pooled.
                for (std::int64_t c = 0; c < channels; ++c) {
                    const A* plane = x.data() + (b * channels + c) * height * width;
                    A* yc = y + (static_cast<std::int64_t>(n) * channels + c) * bins;
                    const sample* s = samples.data();
                    for (std::int64_t k = 0; k < bins; ++k, s += per_bin) {
                        double acc = 0.0;
                        if (max_mode) {
                            // The max of the four weighted corners, as the ONNX definition takes it.
                            for (std::int64_t i = 0; i < per_bin; ++i) {
                                double v = s[i].weight[0] * static_cast<double>(plane[s[i].offset[0]]);
                                for (int q = 1; q < 4; ++q)
                                    v = std::max(v, s[i].weight[q] * static_cast<double>(plane[s[i].offset[q]]));
                                acc = i == 0 ? v : std::max(acc, v);
                            }
                        } else {
                            for (std::int64_t i = 0; i < per_bin; ++i)
                                for (int q = 0; q < 4; ++q) acc += s[i].weight[q] * static_cast<double>(plane[s[i].offset[q]]);
                            acc /= count;
                        }
                        yc[k] = static_cast<A>(acc);
                    }
                }
            }
        });
    });
}

shape nonmax_suppression::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs,
                     2 + (has_max_output ? 1 : 0) + (has_iou_threshold ? 1 : 0) + (has_score_threshold ? 1 : 0));
    const auto& boxes = inputs[0];
    const auto& scores = inputs[1];
    check_rank(name(), boxes, 3, 3, "boxes");
    check_rank(name(), scores, 3, 3, "scores");
    const auto bd = boxes.to_dynamic_dims(), sd = scores.to_dynamic_dims();
    if (!can_be(bd[2], 4) || !can_match(sd[0], bd[0]) || !can_match(sd[2], bd[1]))
        throw_error(error_code::shape, name() + ": boxes " + boxes.to_string() + " must be (B, N, 4) and scores " +
                                           scores.to_string() + " (B, C, N)");
    for (std::size_t i = 2; i < inputs.size(); ++i) {
        const auto dims = inputs[i].to_dynamic_dims();
        if (!std::all_of(dims.begin(), dims.end(), [](const dynamic_dimension& d) { return can_be(d, 1); }))
            throw_error(error_code::shape, name() + ": input " + std::to_string(i) + " " + inputs[i].to_string() +
                                               " must hold one value");
    }
    // At most every box of every class of every batch is selected.
    const std::size_t most = product_or_unbounded(product_or_unbounded(bd[0].max, sd[1].max), bd[1].max);
    return shape::make_dynamic(type::int64, {dynamic_dimension{0, most, {}}, dynamic_dimension{3, 3, {}}});
}

argument nonmax_suppression::compute(const shape&, const std::vector<argument>& args) const {
    // The shapes compute_shape could only check as ranges, checked now that they are known.
    std::vector<shape> given;
    for (const auto& a : args) given.push_back(a.get_shape());
    (void)compute_shape(given);
    const auto& bl = args[0].get_shape().lens();
    const std::size_t batches = bl[0], num = bl[1], classes = args[1].get_shape().lens()[1];
    auto boxes = read_as<double>(args[0]);
    auto scores = read_as<float>(args[1]);
    std::size_t i = 2;
    const std::int64_t max_out = has_max_output ? args[i++].get_int64(0) : 0;
    const double iou_threshold = has_iou_threshold ? static_cast<float>(args[i++].get_double(0)) : 0.0;
    const bool use_score = has_score_threshold;
    const float score_threshold = use_score ? static_cast<float>(args[i].get_double(0)) : 0.0f;
    std::vector<std::int64_t> rows;
    std::vector<nms_box> corners(num);
    std::vector<std::size_t> order;
    for (std::size_t b = 0; b < batches && max_out > 0; ++b) {
        // Corners and areas once per batch: every class tests the same boxes.
        for (std::size_t j = 0; j < num; ++j) {
            const double* p = boxes.data() + (b * num + j) * 4;
            auto& c = corners[j];
            if (center_point_box)
                c = {p[1] - p[3] / 2.0, p[0] - p[2] / 2.0, p[1] + p[3] / 2.0, p[0] + p[2] / 2.0, 0.0};
            else
                c = {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3]), 0.0};
            c.area = (c.y1 - c.y0) * (c.x1 - c.x0);
        }
        nms_box_grid kept(corners);
        for (std::size_t c = 0; c < classes; ++c) {
            const float* s = scores.data() + (b * classes + c) * num;
            order.clear();
            for (std::size_t j = 0; j < num; ++j)
                if (!use_score || s[j] > score_threshold) order.push_back(j);
            // Highest score first; ties keep the lower box index first.
            std::stable_sort(order.begin(), order.end(), [&](std::size_t l, std::size_t r) { return s[l] > s[r]; });
            kept.clear();
            std::int64_t num_kept = 0;
            for (auto j : order) {
                if (num_kept >= max_out) break;
                if (kept.suppressed(corners[j], iou_threshold)) continue;
                kept.add(corners[j]);
                ++num_kept;
                rows.insert(rows.end(),
                            {static_cast<std::int64_t>(b), static_cast<std::int64_t>(c), static_cast<std::int64_t>(j)});
            }
        }
    }
    argument r(shape(type::int64, {rows.size() / 3, 3}));
    std::copy(rows.begin(), rows.end(), r.data_as<std::int64_t>());
    return r;
}

KILN_REGISTER_OP(roi_align)
KILN_REGISTER_OP(nonmax_suppression)

}  // namespace kiln::op
