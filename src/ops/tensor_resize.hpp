// Resize (and Upsample): nearest, linear and cubic interpolation over any number of
// axes, every ONNX coordinate transformation, antialiasing, exclude_outside and the
// aspect-ratio policies. Interpolation is separable: each output element is a sum over
// per-axis neighbour weights, computed in double as the ONNX reference does.
#pragma once
#include "ops/tensor_common.hpp"

namespace kiln::op {

struct resize_options {
    std::string mode = "nearest";  // nearest, linear, cubic
    std::string coordinate_transformation_mode = "half_pixel";
    // round_prefer_floor, round_prefer_ceil, floor, ceil; "simple" (Upsample, Resize-10):
    // floor when enlarging, ceil when shrinking.
    std::string nearest_mode = "round_prefer_floor";
    std::string keep_aspect_ratio_policy = "stretch";
    double cubic_coeff_a = -0.75;
    bool exclude_outside = false;
    double extrapolation_value = 0.0;
    bool antialias = false;
    std::vector<std::int64_t> axes;  // empty: all
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.mode, "mode");
        f(self.coordinate_transformation_mode, "coordinate_transformation_mode");
        f(self.nearest_mode, "nearest_mode");
        f(self.keep_aspect_ratio_policy, "keep_aspect_ratio_policy");
        f(self.cubic_coeff_a, "cubic_coeff_a");
        f(self.exclude_outside, "exclude_outside");
        f(self.extrapolation_value, "extrapolation_value");
        f(self.antialias, "antialias");
        f(self.axes, "axes");
    }
    void validate(const std::string& op_name) const;
};

// Output lens and per-axis scale factors for input `lens`, from scales or sizes (one
// per entry of options.axes, or per dimension).
struct resize_geometry {
    std::vector<std::size_t> out;
    std::vector<double> scales;
};
resize_geometry resize_shape(const resize_options& o, const std::vector<std::size_t>& lens,
                             const std::vector<double>& scales, const std::vector<std::int64_t>& sizes,
                             const std::string& op_name);

// The weights of an output coordinate's neighbours along one axis (ONNX reference
// semantics, in double): for `in` positions resized to `out` by `scale`, with the roi's
// start and end on that axis (0 and 1 without one). Kernels that interpolate their own way
// (the cpu target's) take their taps from here.
struct resize_tap {
    std::size_t index;
    double weight;
};
struct axis_taps {
    std::vector<std::vector<resize_tap>> taps;  // per output coordinate
    std::vector<bool> outside;                  // tf_crop_and_resize: use the extrapolation value
};
axis_taps make_taps(const resize_options& o, std::size_t in, std::size_t out, double scale, double roi_start,
                    double roi_end);

// Resize with known scales or sizes. Input 1, when present, is the roi (run time).
struct resize {
    resize_options options;
    std::vector<double> scales;
    std::vector<std::int64_t> sizes;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.options, "options");
        f(self.scales, "scales");
        f(self.sizes, "sizes");
    }
    std::string name() const { return "resize"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Resize(x[, roi], scales_or_sizes) with the last input read at run time.
struct resize_dynamic {
    resize_options options;
    bool has_roi = false;
    bool use_sizes = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.options, "options");
        f(self.has_roi, "has_roi");
        f(self.use_sizes, "use_sizes");
    }
    std::string name() const { return "resize_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

}  // namespace kiln::op
