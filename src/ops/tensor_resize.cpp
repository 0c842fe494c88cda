#include "ops/tensor_resize.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::op {

void resize_options::validate(const std::string& op_name) const {
    auto one_of = [&](const std::string& v, std::initializer_list<const char*> allowed, const char* what) {
        for (auto* a : allowed)
            if (v == a) return;
        throw_error(error_code::unsupported, op_name + ": unknown " + what + " '" + v + "'");
    };
    one_of(mode, {"nearest", "linear", "cubic"}, "mode");
    one_of(coordinate_transformation_mode,
           {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
            "tf_crop_and_resize", "tf_half_pixel_for_nn"},
           "coordinate_transformation_mode");
    one_of(nearest_mode, {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil", "simple"}, "nearest_mode");
    one_of(keep_aspect_ratio_policy, {"stretch", "not_larger", "not_smaller"}, "keep_aspect_ratio_policy");
}

resize_geometry resize_shape(const resize_options& o, const std::vector<std::size_t>& lens,
                             const std::vector<double>& scales, const std::vector<std::int64_t>& sizes,
                             const std::string& op_name) {
    const std::size_t rank = lens.size();
    std::vector<std::int64_t> ax = o.axes;
    if (ax.empty())
        for (std::size_t i = 0; i < rank; ++i) ax.push_back(static_cast<std::int64_t>(i));
    auto norm = normalize_axes(ax, rank, op_name);
    resize_geometry g{lens, std::vector<double>(rank, 1.0)};
    if (!scales.empty()) {
        if (scales.size() != norm.size())
            throw_error(error_code::shape, op_name + ": " + std::to_string(scales.size()) + " scales for " +
                                               std::to_string(norm.size()) + " axes");
        for (std::size_t k = 0; k < norm.size(); ++k) {
            if (!(scales[k] > 0)) throw_error(error_code::shape, op_name + ": scales must be positive");
            if (!(static_cast<double>(lens[norm[k]]) * scales[k] < static_cast<double>(max_dim)))
                throw_error(error_code::shape, op_name + ": scale " + std::to_string(scales[k]) + " makes the output too large");
            g.scales[norm[k]] = scales[k];
            g.out[norm[k]] = static_cast<std::size_t>(std::floor(static_cast<double>(lens[norm[k]]) * scales[k]));
        }
        return g;
    }
    if (sizes.size() != norm.size())
        throw_error(error_code::shape, op_name + ": " + std::to_string(sizes.size()) + " sizes for " +
                                           std::to_string(norm.size()) + " axes (give scales or sizes)");
    for (auto s : sizes) check_dim_value(s, op_name, "output size");
    if (o.keep_aspect_ratio_policy == "stretch") {
        for (std::size_t k = 0; k < norm.size(); ++k) {
            g.out[norm[k]] = static_cast<std::size_t>(sizes[k]);
            g.scales[norm[k]] = static_cast<double>(sizes[k]) / static_cast<double>(lens[norm[k]]);
        }
        return g;
    }
    // One scale for every listed axis, so the aspect ratio is kept.
    bool larger = o.keep_aspect_ratio_policy == "not_smaller";
    double s = larger ? 0.0 : HUGE_VAL;
    for (std::size_t k = 0; k < norm.size(); ++k) {
        double r = static_cast<double>(sizes[k]) / static_cast<double>(lens[norm[k]]);
        s = larger ? std::max(s, r) : std::min(s, r);
    }
    for (auto a : norm) {
        if (!(s * static_cast<double>(lens[a]) < static_cast<double>(max_dim)))
            throw_error(error_code::shape, op_name + ": the kept-aspect output is too large");
        g.scales[a] = s;
        g.out[a] = static_cast<std::size_t>(std::nearbyint(s * static_cast<double>(lens[a])));
    }
    return g;
}

namespace {

double source_coordinate(const resize_options& o, double x, double scale, std::size_t in, std::size_t out_int,
                         double roi_start, double roi_end) {
    const double in_w = static_cast<double>(in);
    const double out_w = scale * in_w;
    const auto& m = o.coordinate_transformation_mode;
    if (m == "align_corners") return out_w == 1 ? 0.0 : x * (in_w - 1) / (out_w - 1);
    if (m == "asymmetric") return x / scale;
    if (m == "tf_crop_and_resize") {
        double v = out_w == 1 ? (roi_end - roi_start) * (in_w - 1) / 2 : x * (roi_end - roi_start) * (in_w - 1) / (out_w - 1);
        return v + roi_start * (in_w - 1);
    }
    if (m == "tf_half_pixel_for_nn") return (x + 0.5) / scale;  // Resize-11 only
    if (m == "pytorch_half_pixel") return out_w == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
    if (m == "half_pixel_symmetric") {
        double adjustment = static_cast<double>(out_int) / out_w;
        double offset = in_w / 2 * (1 - adjustment);
        return offset + (x + 0.5) / scale - 0.5;
    }
    return (x + 0.5) / scale - 0.5;  // half_pixel
}

std::vector<double> coefficients(const resize_options& o, double ratio, double scale) {
    if (o.mode == "nearest") {
        if (ratio == 1.0) return {0, 1};
        const auto& n = o.nearest_mode;
        bool up = n == "round_prefer_floor" ? ratio > 0.5
                  : n == "round_prefer_ceil" ? ratio >= 0.5
                  : n == "floor"             ? false
                  : n == "ceil"              ? true
                                             : scale < 1.0;  // simple
        return {up ? 0.0 : 1.0, up ? 1.0 : 0.0};
    }
    if (o.mode == "linear") {
        if (!o.antialias) return {1 - ratio, ratio};
        double s = std::min(scale, 1.0);
        auto start = static_cast<std::int64_t>(std::floor(-1 / s) + 1);
        std::vector<double> c;
        double sum = 0;
        for (std::int64_t i = start; i < 2 - start; ++i) {
            c.push_back(std::clamp(1 - std::fabs((static_cast<double>(i) - ratio) * s), 0.0, 1.0));
            sum += c.back();
        }
        for (auto& v : c) v /= sum;
        return c;
    }
    const double A = o.cubic_coeff_a;
    if (!o.antialias) {
        double r = ratio, q = 1 - ratio;
        return {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                ((A + 2) * r - (A + 3)) * r * r + 1,
                ((A + 2) * q - (A + 3)) * q * q + 1,
                ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
    }
    double s = std::min(scale, 1.0);
    auto kernel = [&](double x) {
        x = std::fabs(x);
        if (x <= 1) return (A + 2) * x * x * x - (A + 3) * x * x + 1;
        if (x < 2) return A * x * x * x - 5 * A * x * x + 8 * A * x - 4 * A;
        return 0.0;
    };
    auto start = static_cast<std::int64_t>(std::floor(-2 / s) + 1);
    std::vector<double> c;
    double sum = 0;
    for (std::int64_t i = start; i < 2 - start; ++i) {
        c.push_back(kernel(s * (static_cast<double>(i) - ratio)));
        sum += c.back();
    }
    for (auto& v : c) v /= sum;
    return c;
}

}  // namespace

axis_taps make_taps(const resize_options& o, std::size_t in, std::size_t out, double scale, double roi_start,
                    double roi_end) {
    axis_taps t;
    t.taps.resize(out);
    t.outside.assign(out, false);
    const auto in_i = static_cast<std::int64_t>(in);
    for (std::size_t x = 0; x < out; ++x) {
        double xo = source_coordinate(o, static_cast<double>(x), scale, in, out, roi_start, roi_end);
        if (o.coordinate_transformation_mode == "tf_crop_and_resize" && (xo < 0 || xo > static_cast<double>(in) - 1)) {
            t.outside[x] = true;
            continue;
        }
        double fl = std::floor(xo);
        double ratio = xo == fl ? 1.0 : xo - fl;
        auto base = static_cast<std::int64_t>(xo - ratio);  // exact: xo - ratio is an integer
        auto c = coefficients(o, ratio, scale);
        auto n = static_cast<std::int64_t>(c.size());
        // The n neighbours nearest xo within the edge-padded range [-pad, in + pad).
        std::int64_t pad = (n + 1) / 2;
        std::int64_t first = base - n / 2 + 1;
        first = std::max(first, -pad);
        first = std::min(first, in_i + pad - n);
        if (o.exclude_outside) {
            double sum = 0;
            for (std::int64_t k = 0; k < n; ++k) {
                auto idx = first + k;
                if (idx < 0 || idx >= in_i) c[static_cast<std::size_t>(k)] = 0;
                sum += c[static_cast<std::size_t>(k)];
            }
            for (auto& v : c) v /= sum;
        }
        for (std::int64_t k = 0; k < n; ++k) {
            double w = c[static_cast<std::size_t>(k)];
            if (w == 0) continue;
            auto idx = std::clamp<std::int64_t>(first + k, 0, in_i - 1);
            t.taps[x].push_back({static_cast<std::size_t>(idx), w});
        }
    }
    return t;
}

namespace {

argument run_resize(const resize_options& o, const resize_geometry& g, const argument& x_any, const argument* roi_arg,
                    const std::string& op_name) {
    argument x = x_any.contiguous();
    const auto& il = x.get_shape().lens();
    const std::size_t rank = il.size();
    std::vector<double> roi;
    if (roi_arg != nullptr && o.coordinate_transformation_mode == "tf_crop_and_resize")
        roi = roi_arg->to_vector<double>();
    // Full-rank roi: [starts..., ends...]; axes not listed keep [0, 1].
    std::vector<double> starts(rank, 0.0), ends(rank, 1.0);
    if (!roi.empty()) {
        std::vector<std::int64_t> ax = o.axes;
        if (ax.empty())
            for (std::size_t i = 0; i < rank; ++i) ax.push_back(static_cast<std::int64_t>(i));
        auto norm = normalize_axes(ax, rank, op_name);
        if (roi.size() != 2 * norm.size())
            throw_error(error_code::shape, op_name + ": roi has " + std::to_string(roi.size()) + " values for " +
                                               std::to_string(norm.size()) + " axes");
        for (std::size_t k = 0; k < norm.size(); ++k) {
            starts[norm[k]] = roi[k];
            ends[norm[k]] = roi[norm.size() + k];
        }
    }
    std::vector<axis_taps> taps;
    for (std::size_t d = 0; d < rank; ++d) taps.push_back(make_taps(o, il[d], g.out[d], g.scales[d], starts[d], ends[d]));
    shape out_shape(x.get_shape().get_type(), g.out);
    argument r(out_shape);
    auto in_strides = shape::standard_strides(il);
    visit_numeric(out_shape.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        const C* s = x.template data_as<C>();
        C* dst = r.template data_as<C>();
        const std::size_t n = out_shape.elements();
        // The usual case: every axis but the last two copied (one tap of weight 1 at the same
        // coordinate), so a plane at a time with the two spatial axes' taps nested, summed in
        // the order and with the weights of the general loop below, at a fraction of its cost
        // (Keypoint R-CNN's heatmap upsampling: 36 ns an output element there).
        auto copied = [&](std::size_t d) {
            if (g.out[d] != il[d]) return false;
            for (std::size_t i = 0; i < il[d]; ++i) {
                const auto& t = taps[d].taps[i];
                if (taps[d].outside[i] || t.size() != 1 || t[0].index != i || t[0].weight != 1.0) return false;
            }
            return true;
        };
        bool planes = rank >= 2;
        for (std::size_t d = 0; planes && d + 2 < rank; ++d) planes = copied(d);
        if (planes) {
            const auto& th = taps[rank - 2];
            const auto& tw = taps[rank - 1];
            const std::size_t oh = g.out[rank - 2], ow = g.out[rank - 1], ih = il[rank - 2], iw = il[rank - 1];
            const std::size_t count = oh * ow == 0 ? 0 : n / (oh * ow);
            for (std::size_t p = 0; p < count; ++p) {
                const C* plane = s + p * ih * iw;
                C* out = dst + p * oh * ow;
                for (std::size_t y = 0; y < oh; ++y)
                    for (std::size_t x_ = 0; x_ < ow; ++x_) {
                        const bool outside = th.outside[y] || tw.outside[x_];
                        const bool empty = th.taps[y].empty() || tw.taps[x_].empty();
                        if (outside || empty) {
                            out[y * ow + x_] = convert<C>(outside ? o.extrapolation_value : 0.0);
                            continue;
                        }
                        double acc = 0;
                        for (const auto& a : th.taps[y])
                            for (const auto& b : tw.taps[x_])
                                acc += (a.weight * b.weight) * convert<double>(plane[a.index * iw + b.index]);
                        out[y * ow + x_] = convert<C>(acc);
                    }
            }
            return;
        }
        std::vector<std::size_t> idx(rank, 0), pick(rank, 0);
        for (std::size_t i = 0; i < n; ++i) {
            if (i > 0) next_index(idx, g.out);
            bool outside = false, empty = false;
            for (std::size_t d = 0; d < rank; ++d) {
                outside = outside || taps[d].outside[idx[d]];
                empty = empty || taps[d].taps[idx[d]].empty();
            }
            if (empty && !outside) {
                dst[i] = convert<C>(0.0);
                continue;
            }
            if (outside) {
                dst[i] = convert<C>(o.extrapolation_value);
                continue;
            }
            // Sum over the cartesian product of the per-axis taps.
            double acc = 0;
            std::fill(pick.begin(), pick.end(), 0);
            while (true) {
                double w = 1;
                std::size_t off = 0;
                for (std::size_t d = 0; d < rank; ++d) {
                    const auto& t = taps[d].taps[idx[d]][pick[d]];
                    w *= t.weight;
                    off += t.index * in_strides[d];
                }
                acc += w * convert<double>(s[off]);
                std::size_t d = rank;
                while (d-- > 0) {
                    if (++pick[d] < taps[d].taps[idx[d]].size()) break;
                    pick[d] = 0;
                }
                if (d == static_cast<std::size_t>(-1)) break;
            }
            dst[i] = convert<C>(acc);
        }
    }, op_name);
    return r;
}

std::vector<double> as_doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

}  // namespace

// ---- resize

shape resize::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1, 2);
    check_rank(name(), in[0], 1, 64, "X");
    options.validate(name());
    auto g = resize_shape(options, in[0].lens(), scales, sizes, name());
    return shape(in[0].get_type(), g.out);
}

argument resize::compute(const shape&, const std::vector<argument>& args) const {
    auto g = resize_shape(options, args[0].get_shape().lens(), scales, sizes, name());
    return run_resize(options, g, args[0], args.size() > 1 ? &args[1] : nullptr, name());
}

// ---- resize_dynamic

shape resize_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, has_roi ? 3 : 2);
    check_rank(name(), in[0], 1, 64, "X");
    options.validate(name());
    return unknown_dims(in[0].get_type(), in[0].ndim());
}

argument resize_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    resize r{options, {}, {}};
    if (use_sizes) r.sizes = read_ints(args.back(), name(), "sizes");
    else r.scales = as_doubles(args.back().to_vector<float>());
    std::vector<argument> in{args[0]};
    if (has_roi) in.push_back(args[1]);
    return r.compute(shape{}, in);
}

std::optional<static_form> resize_dynamic::to_static(const known_inputs& k) const {
    if (!k.back()) return std::nullopt;
    resize r{options, {}, {}};
    if (use_sizes) r.sizes = read_ints(*k.back(), name(), "sizes");
    else r.scales = as_doubles(k.back()->to_vector<float>());
    std::vector<std::size_t> keep{0};
    if (has_roi) keep.push_back(1);
    return static_form{r, keep};
}

KILN_REGISTER_OP(resize)
KILN_REGISTER_OP(resize_dynamic)

}  // namespace kiln::op
