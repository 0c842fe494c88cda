#include "ops/quant_fused.hpp"

#include "ops/nn_conv_quant.hpp"
#include "ops/nn_matmul.hpp"

#include <kiln/register_op.hpp>

#include <cmath>

namespace kiln::op {

namespace {

bool is_8bit(type t) { return t == type::int8 || t == type::uint8; }

// A one-element tensor of type t holding v (a zero point operand of the integer ops).
argument scalar_of(type t, std::int64_t v) {
    argument a{shape(t, {1})};
    if (t == type::int8) *a.data_as<std::int8_t>() = static_cast<std::int8_t>(v);
    else *a.data_as<std::uint8_t>() = static_cast<std::uint8_t>(v);
    return a;
}

template <class T>
T quantize_value(float v, const requantize_params& p) {
    double r = std::nearbyint(v / p.y_scale);
    if (std::isnan(r)) r = 0;
    r = std::fmin(std::fmax(r + static_cast<double>(p.y_zero_point), static_cast<double>(p.y_min)),
                  static_cast<double>(p.y_max));
    return static_cast<T>(r);
}

}  // namespace

void requantize_params::check(const std::string& op_name, const std::vector<shape>& inputs,
                              std::size_t channels, std::size_t extra) const {
    check_num_inputs(op_name, inputs, (has_bias ? 3 : 2) + extra);
    for (std::size_t i = 0; i < 2; ++i)
        if (!inputs[i].is_tensor() || !is_8bit(inputs[i].get_type()))
            throw_error(error_code::type, op_name + ": input " + std::to_string(i) + " " + inputs[i].to_string() +
                                              " must be int8 or uint8");
    if (w_scales.size() != 1 && w_scales.size() != channels)
        throw_error(error_code::shape, op_name + ": " + std::to_string(w_scales.size()) + " weight scales for " +
                                           std::to_string(channels) + " output channels");
    if (has_bias) {
        const auto& b = inputs[2];
        if (!b.is_tensor() || (b.get_type() != type::int32 && b.get_type() != type::float32) ||
            b.elements() != channels)
            throw_error(error_code::shape, op_name + ": bias " + b.to_string() + " must be int32 or float32 with " +
                                               std::to_string(channels) + " elements");
    }
    if (out_type != type::float32) {
        if (!is_8bit(out_type))
            throw_error(error_code::type, op_name + ": out_type " + std::string(type_name(out_type)) +
                                              " must be float32, int8 or uint8");
        const std::int64_t lo = out_type == type::int8 ? -128 : 0, hi = out_type == type::int8 ? 127 : 255;
        if (y_min < lo || y_max > hi || y_min > y_max || y_zero_point < lo || y_zero_point > hi || !(y_scale > 0))
            throw_error(error_code::invalid_argument, op_name + ": bad output quantization (scale " +
                                                          std::to_string(y_scale) + ", zero point " +
                                                          std::to_string(y_zero_point) + ", range " +
                                                          std::to_string(y_min) + ".." + std::to_string(y_max) + ")");
    }
}

argument requantize_params::requantize(const shape& out, const argument& acc_arg, const std::vector<argument>& args,
                                       std::size_t inner, std::size_t channels, const requantize_residual& res) const {
    const auto* acc = acc_arg.data_as<std::int32_t>();
    std::vector<float> rv;  // the residual's levels, row-major
    if (res.r) rv = res.r->to_vector<float>();
    const float r_zero = static_cast<float>(res.zero_point);
    const std::size_t n = out.elements();
    std::vector<double> bias;
    const bool int_bias = has_bias && args[2].get_shape().get_type() == type::int32;
    if (has_bias) bias = args[2].to_vector<double>();
    argument r(out.as_standard());
    auto value = [&](std::size_t i) {
        const std::size_t c = (i / inner) % channels;
        double a = static_cast<double>(acc[i]) + (int_bias ? bias[c] : 0.0);
        double v = a * static_cast<double>(channel_scale(c));
        if (has_bias && !int_bias) v += bias[c];
        float f = static_cast<float>(v);
        if (res.r) {  // DequantizeLinear(r) and the Add, in float32 steps
            const float d = (rv[i] - r_zero) * res.scale;
            f = f + d;
        }
        return f;
    };
    if (out_type == type::float32) {
        auto* y = r.data_as<float>();
        for (std::size_t i = 0; i < n; ++i) y[i] = value(i);
    } else if (out_type == type::int8) {
        auto* y = r.data_as<std::int8_t>();
        for (std::size_t i = 0; i < n; ++i) y[i] = quantize_value<std::int8_t>(value(i), *this);
    } else {
        auto* y = r.data_as<std::uint8_t>();
        for (std::size_t i = 0; i < n; ++i) y[i] = quantize_value<std::uint8_t>(value(i), *this);
    }
    return r;
}

shape quant_convolution::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() < 2) check_num_inputs(name(), inputs, 2);
    auto g = conv_geom(name(), inputs[0], inputs[1]);
    check(name(), inputs, static_cast<std::size_t>(g.out_channels), has_residual ? 1 : 0);
    std::vector<std::size_t> lens{static_cast<std::size_t>(g.batch), static_cast<std::size_t>(g.out_channels)};
    for (auto o : g.out) lens.push_back(static_cast<std::size_t>(o));
    if (has_residual) {
        const auto& r = inputs[residual_index()];
        if (!r.is_tensor() || !is_8bit(r.get_type()) || r.lens() != lens)
            throw_error(error_code::shape, name() + ": residual " + r.to_string() +
                                               " must be int8 or uint8 with the result's lens");
        if (!(r_scale > 0) || r_zero_point < (r.get_type() == type::int8 ? -128 : 0) ||
            r_zero_point > (r.get_type() == type::int8 ? 127 : 255))
            throw_error(error_code::invalid_argument, name() + ": bad residual quantization (scale " +
                                                          std::to_string(r_scale) + ", zero point " +
                                                          std::to_string(r_zero_point) + ")");
    }
    return shape(out_type, lens);
}

argument quant_convolution::compute(const shape& out, const std::vector<argument>& args) const {
    convolution_integer ci;
    static_cast<conv_attributes&>(ci) = *this;
    ci.has_x_zero_point = ci.has_w_zero_point = true;
    std::vector<argument> in{args[0], args[1], scalar_of(args[0].get_shape().get_type(), x_zero_point),
                             scalar_of(args[1].get_shape().get_type(), w_zero_point)};
    shape acc_shape(type::int32, out.lens());
    auto acc = ci.compute(acc_shape, in);
    const auto& l = out.lens();
    std::size_t inner = 1;
    for (std::size_t d = 2; d < l.size(); ++d) inner *= l[d];
    requantize_residual res;
    if (has_residual) res = {&args.at(residual_index()), r_scale, r_zero_point};
    return requantize(out, acc, args, inner, l[1], res);
}

shape quant_dot::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() < 2) check_num_inputs(name(), inputs, 2);
    auto lens = matmul_lens(name(), inputs[0].lens(), inputs[1].lens());
    check(name(), inputs, inputs[1].lens().back());
    return shape(out_type, lens);
}

argument quant_dot::compute(const shape& out, const std::vector<argument>& args) const {
    matmul_integer mi;
    mi.has_a_zero_point = mi.has_b_zero_point = true;
    std::vector<argument> in{args[0], args[1], scalar_of(args[0].get_shape().get_type(), x_zero_point),
                             scalar_of(args[1].get_shape().get_type(), w_zero_point)};
    auto acc = mi.compute(shape(type::int32, out.lens()), in);
    const std::size_t n = args[1].get_shape().lens().back();
    return requantize(out, acc, args, 1, n);
}

shape quant_add::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2);
    for (const auto& s : inputs)
        if (!s.is_tensor() || !is_8bit(s.get_type()))
            throw_error(error_code::type, name() + ": input " + s.to_string() + " must be int8 or uint8");
    if (!is_8bit(out_type)) throw_error(error_code::type, name() + ": out_type must be int8 or uint8");
    if (inputs[0].lens() != inputs[1].lens())
        throw_error(error_code::shape, name() + ": inputs " + inputs[0].to_string() + " and " + inputs[1].to_string() +
                                           " must have equal lens");
    return shape(out_type, inputs[0].lens());
}

argument quant_add::compute(const shape& out, const std::vector<argument>& args) const {
    auto a = args[0].to_vector<float>();
    auto b = args[1].to_vector<float>();
    argument r(out.as_standard());
    const float lo = out_type == type::int8 ? -128.0f : 0.0f, hi = out_type == type::int8 ? 127.0f : 255.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        float q = apply(a[i], b[i]);
        q = std::isnan(q) ? static_cast<float>(y_zero_point) : std::fmin(std::fmax(q, lo), hi);
        if (out_type == type::int8) r.data_as<std::int8_t>()[i] = static_cast<std::int8_t>(q);
        else r.data_as<std::uint8_t>()[i] = static_cast<std::uint8_t>(q);
    }
    return r;
}

KILN_REGISTER_OP(quant_add)
KILN_REGISTER_OP(quant_convolution)
KILN_REGISTER_OP(quant_dot)

}  // namespace kiln::op
