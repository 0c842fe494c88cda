// Integer convolutions: ConvInteger (int32 result of (x - x_zp) * (w - w_zp)) and
// QLinearConv (the same, plus an int32 bias, requantized to the output's 8-bit type).
// Both share convolution's attributes and geometry; accumulation is exact in int64.
#pragma once
#include "ops/nn_conv.hpp"

#include <cmath>
#include <limits>

namespace kiln::op {

// Inputs (x, w[, x_zero_point][, w_zero_point]); the flags say which zero points are
// present (either may be omitted on its own). w_zero_point may be per output channel.
struct convolution_integer : conv_attributes {
    bool has_x_zero_point = false;
    bool has_w_zero_point = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        conv_attributes::reflect(self, f);
        f(self.has_x_zero_point, "has_x_zero_point");
        f(self.has_w_zero_point, "has_w_zero_point");
    }
    std::string name() const { return "convolution_integer"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point[, bias]).
// The result has y_zero_point's type: round-half-even of acc * x_scale * w_scale / y_scale,
// plus y_zero_point, saturated.
struct qlinear_convolution : conv_attributes {
    std::string name() const { return "qlinear_convolution"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Values of a quantization parameter (scale or zero point) that is either one value
// or one per channel; checks its size against `channels`.
std::vector<double> per_channel_values(const std::string& op_name, const std::string& what, const argument& a,
                                       std::int64_t channels);
void check_per_channel(const std::string& op_name, const std::string& what, const shape& s, std::int64_t channels);

// Rounds half to even, adds the zero point and saturates into T (an integer type).
template <class T>
T saturate_round(double v, double zero_point) {
    double r = std::nearbyint(v) + zero_point;
    constexpr double lo = static_cast<double>(std::numeric_limits<T>::lowest());
    constexpr double hi = static_cast<double>(std::numeric_limits<T>::max());
    return static_cast<T>(std::min(hi, std::max(lo, r)));
}

}  // namespace kiln::op
