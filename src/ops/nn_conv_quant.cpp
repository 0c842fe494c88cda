#include "ops/nn_conv_quant.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

namespace {

bool is_8bit(type t) { return t == type::int8 || t == type::uint8; }

void check_8bit(const std::string& op_name, const std::string& what, const shape& s) {
    if (!s.is_tensor() || !is_8bit(s.get_type()))
        throw_error(error_code::type, op_name + ": " + what + " " + s.to_string() + " must be int8 or uint8");
}

std::vector<std::size_t> conv_output_lens(const conv_geometry& g) {
    std::vector<std::size_t> lens{static_cast<std::size_t>(g.batch), static_cast<std::size_t>(g.out_channels)};
    for (auto o : g.out) lens.push_back(static_cast<std::size_t>(o));
    return lens;
}

// x - zero_point as int64, row-major.
std::vector<std::int64_t> shifted(const argument& a, std::int64_t zero_point) {
    auto v = read_as<std::int64_t>(a);
    std::vector<std::int64_t> out(v.size);
    for (std::size_t i = 0; i < v.size; ++i) out[i] = v[i] - zero_point;
    return out;
}

// w - w_zp[m] for weights (M, ...): the zero point is per output channel or shared.
std::vector<std::int64_t> shifted_weights(const argument& w, const std::vector<double>& zp) {
    auto v = read_as<std::int64_t>(w);
    const std::size_t m = w.get_shape().lens()[0];
    const std::size_t per = m ? v.size / m : 0;
    std::vector<std::int64_t> out(v.size);
    for (std::size_t i = 0; i < v.size; ++i) out[i] = v[i] - static_cast<std::int64_t>(zp[zp.size() == 1 ? 0 : i / per]);
    return out;
}

}  // namespace

void check_per_channel(const std::string& op_name, const std::string& what, const shape& s, std::int64_t channels) {
    if (!s.is_tensor() || s.dynamic() ||
        !(s.elements() == 1 || (s.ndim() == 1 && static_cast<std::int64_t>(s.elements()) == channels)))
        throw_error(error_code::shape, op_name + ": " + what + " " + s.to_string() + " must be a scalar or have " +
                                           std::to_string(channels) + " elements (one per output channel)");
}

std::vector<double> per_channel_values(const std::string& op_name, const std::string& what, const argument& a,
                                       std::int64_t channels) {
    check_per_channel(op_name, what, a.get_shape(), channels);
    return a.to_vector<double>();
}

shape convolution_integer::compute_shape(const std::vector<shape>& inputs) const {
    const std::size_t n = 2 + (has_x_zero_point ? 1 : 0) + (has_w_zero_point ? 1 : 0);
    check_num_inputs(name(), inputs, n);
    check_8bit(name(), "x", inputs[0]);
    check_8bit(name(), "w", inputs[1]);
    auto g = conv_geom(name(), inputs[0], inputs[1]);
    std::size_t i = 2;
    if (has_x_zero_point) {
        if (inputs[i].get_type() != inputs[0].get_type() || inputs[i].elements() != 1)
            throw_error(error_code::shape, name() + ": x_zero_point " + inputs[i].to_string() +
                                               " must be one value of x's type");
        ++i;
    }
    if (has_w_zero_point) {
        if (inputs[i].get_type() != inputs[1].get_type())
            throw_error(error_code::type, name() + ": w_zero_point " + inputs[i].to_string() + " must have w's type");
        check_per_channel(name(), "w_zero_point", inputs[i], g.out_channels);
    }
    return shape(type::int32, conv_output_lens(g));
}

argument convolution_integer::compute(const shape& out, const std::vector<argument>& args) const {
    auto g = conv_geom(name(), args[0].get_shape(), args[1].get_shape());
    std::size_t i = 2;
    std::int64_t xzp = has_x_zero_point ? args[i++].get_int64(0) : 0;
    std::vector<double> wzp{0.0};
    if (has_w_zero_point) wzp = per_channel_values(name(), "w_zero_point", args[i], g.out_channels);
    auto x = shifted(args[0], xzp);
    auto w = shifted_weights(args[1], wzp);
    return produce<std::int64_t>(out, [&](std::int64_t* y) { conv_forward<std::int64_t>(g, x.data(), w.data(), nullptr, y); });
}

shape qlinear_convolution::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 8, 9);
    check_8bit(name(), "x", inputs[0]);
    check_8bit(name(), "w", inputs[3]);
    check_8bit(name(), "y_zero_point", inputs[7]);
    auto g = conv_geom(name(), inputs[0], inputs[3]);
    for (std::size_t i : {1u, 6u})
        if (!is_float(inputs[i].get_type()) || inputs[i].elements() != 1)
            throw_error(error_code::shape, name() + ": " + (i == 1 ? "x_scale " : "y_scale ") + inputs[i].to_string() +
                                               " must be one floating-point value");
    if (inputs[2].get_type() != inputs[0].get_type() || inputs[2].elements() != 1)
        throw_error(error_code::shape, name() + ": x_zero_point " + inputs[2].to_string() + " must be one value of x's type");
    if (inputs[5].get_type() != inputs[3].get_type())
        throw_error(error_code::type, name() + ": w_zero_point " + inputs[5].to_string() + " must have w's type");
    check_per_channel(name(), "w_scale", inputs[4], g.out_channels);
    check_per_channel(name(), "w_zero_point", inputs[5], g.out_channels);
    if (inputs[7].elements() != 1)
        throw_error(error_code::shape, name() + ": y_zero_point " + inputs[7].to_string() + " must be one value");
    if (inputs.size() == 9) {
        if (inputs[8].get_type() != type::int32)
            throw_error(error_code::type, name() + ": bias " + inputs[8].to_string() + " must be int32");
        check_conv_bias(name(), inputs[8], g.out_channels);
    }
    return shape(inputs[7].get_type(), conv_output_lens(g));
}

argument qlinear_convolution::compute(const shape& out, const std::vector<argument>& args) const {
    auto g = conv_geom(name(), args[0].get_shape(), args[3].get_shape());
    const float x_scale = static_cast<float>(args[1].get_double(0));
    const float y_scale = static_cast<float>(args[6].get_double(0));
    const double y_zp = args[7].get_double(0);
    auto w_scale = per_channel_values(name(), "w_scale", args[4], g.out_channels);
    auto w_zp = per_channel_values(name(), "w_zero_point", args[5], g.out_channels);
    auto x = shifted(args[0], args[2].get_int64(0));
    auto w = shifted_weights(args[3], w_zp);
    std::vector<std::int64_t> bias;
    if (args.size() == 9) {
        auto b = read_as<std::int64_t>(args[8]);
        bias.assign(b.data(), b.data() + b.size);
    }
    std::vector<std::int64_t> acc(out.elements());
    conv_forward<std::int64_t>(g, x.data(), w.data(), bias.empty() ? nullptr : bias.data(), acc.data());
    const std::size_t plane = static_cast<std::size_t>(product(g.out));
    argument r(out.as_standard());
    visit_numeric(out.get_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T>) {
            T* y = r.data_as<T>();
            for (std::size_t i = 0; i < acc.size(); ++i) {
                const std::size_t m = (i / plane) % static_cast<std::size_t>(g.out_channels);
                // The combined scale in float, as the ONNX definition computes it.
                const float s = x_scale * static_cast<float>(w_scale[w_scale.size() == 1 ? 0 : m]) / y_scale;
                y[i] = saturate_round<T>(static_cast<double>(acc[i]) * static_cast<double>(s), y_zp);
            }
        }
    }, name());
    return r;
}

KILN_REGISTER_OP(convolution_integer)
KILN_REGISTER_OP(qlinear_convolution)

}  // namespace kiln::op
