#include "ops/nn_conv.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

namespace {

std::string dims_string(const std::vector<std::int64_t>& v) {
    std::string s = "{";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "}";
}

// Python-style floor division (ONNX's formulas for ConvTranspose pads use it on
// negative totals).
std::int64_t floor_div(std::int64_t a, std::int64_t b) {
    std::int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

void check_conv_inputs(const std::string& op_name, const shape& x, const shape& w) {
    check_rank(op_name, x, 3, 64, "input x");
    check_rank(op_name, w, x.ndim(), x.ndim(), "weights w");
}

}  // namespace

void check_conv_bias(const std::string& op_name, const shape& b, std::int64_t out_channels) {
    check_rank(op_name, b, 1, 1, "bias");
    if (static_cast<std::int64_t>(b.lens()[0]) != out_channels)
        throw_error(error_code::shape, op_name + ": bias " + b.to_string() + " must have " +
                                           std::to_string(out_channels) + " elements (one per output channel)");
}

conv_geometry conv_attributes::conv_geom(const std::string& op_name, const shape& x, const shape& w) const {
    check_conv_inputs(op_name, x, w);
    const std::size_t r = x.ndim() - 2;
    conv_geometry g;
    g.batch = static_cast<std::int64_t>(x.lens()[0]);
    g.in_channels = static_cast<std::int64_t>(x.lens()[1]);
    g.out_channels = static_cast<std::int64_t>(w.lens()[0]);
    g.group = group;
    if (group < 1 || g.in_channels % group != 0 || g.out_channels % group != 0)
        throw_error(error_code::shape, op_name + ": group " + std::to_string(group) + " must divide the " +
                                           std::to_string(g.in_channels) + " input channels of x " + x.to_string() +
                                           " and the " + std::to_string(g.out_channels) + " output channels of w " +
                                           w.to_string());
    if (static_cast<std::int64_t>(w.lens()[1]) * group != g.in_channels)
        throw_error(error_code::shape, op_name + ": weights " + w.to_string() + " have " +
                                           std::to_string(w.lens()[1]) + " input channels per group, expected " +
                                           std::to_string(g.in_channels / group) + " for x " + x.to_string() +
                                           " and group " + std::to_string(group));
    g.in = spatial_dims(x);
    g.kernel = spatial_dims(w);
    g.stride = spatial_attr(stride, r, 1, op_name, "stride");
    g.dilation = spatial_attr(dilation, r, 1, op_name, "dilation");
    auto pads = padding_mode == pad_mode::explicit_pads ? padding_attr(padding, r, op_name)
                                                        : same_padding(padding_mode, g.in, g.kernel, g.stride, g.dilation);
    g.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
    for (std::size_t d = 0; d < r; ++d) {
        if (g.kernel[d] < 1) throw_error(error_code::shape, op_name + ": weights " + w.to_string() + " have an empty kernel");
        g.out.push_back(window_output_size(g.in[d], g.kernel[d], g.stride[d], g.dilation[d], pads[d], pads[d + r],
                                           false, op_name));
    }
    return g;
}

shape convolution::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2, 3);
    check_same_type(name(), inputs);
    if (!is_float_compute_type(inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported (float16, bfloat16, float32, float64)");
    auto g = conv_geom(name(), inputs[0], inputs[1]);
    if (inputs.size() == 3) check_conv_bias(name(), inputs[2], g.out_channels);
    std::vector<std::size_t> lens{static_cast<std::size_t>(g.batch), static_cast<std::size_t>(g.out_channels)};
    for (auto o : g.out) lens.push_back(static_cast<std::size_t>(o));
    return shape(inputs[0].get_type(), lens);
}

argument convolution::compute(const shape& out, const std::vector<argument>& args) const {
    auto g = conv_geom(name(), args[0].get_shape(), args[1].get_shape());
    return visit_float_compute(out.get_type(), name(), [&](auto tag) {
        using A = typename decltype(tag)::type;
        auto x = read_as<A>(args[0]);
        auto w = read_as<A>(args[1]);
        compute_buffer<A> b;
        if (args.size() == 3) b = read_as<A>(args[2]);
        return produce<A>(out, [&](A* y) { conv_forward<A>(g, x.data(), w.data(), args.size() == 3 ? b.data() : nullptr, y); });
    });
}

std::vector<std::int64_t> deconvolution::resolved_padding(const std::vector<std::int64_t>& in,
                                                          const std::vector<std::int64_t>& kernel) const {
    const std::size_t r = in.size();
    auto s = spatial_attr(stride, r, 1, name(), "stride");
    auto d = spatial_attr(dilation, r, 1, name(), "dilation");
    auto op = spatial_attr(output_padding, r, 0, name(), "output_padding", false);
    if (output_size.empty() && padding_mode == pad_mode::explicit_pads) return padding_attr(padding, r, name());
    if (!output_size.empty() && output_size.size() != r)
        throw_error(error_code::shape, name() + ": output_size " + dims_string(output_size) + " must have " +
                                           std::to_string(r) + " values (one per spatial dimension)");
    std::vector<std::int64_t> pads(2 * r);
    for (std::size_t i = 0; i < r; ++i) {
        const std::int64_t full = s[i] * (in[i] - 1) + op[i] + (kernel[i] - 1) * d[i] + 1;
        const std::int64_t want = output_size.empty() ? in[i] * s[i] : output_size[i];
        const std::int64_t total = full - want;
        // The ONNX spec's split: SAME_UPPER puts the smaller half first, otherwise the larger.
        if (padding_mode == pad_mode::same_upper) {
            pads[i] = floor_div(total, 2);
            pads[i + r] = total - floor_div(total, 2);
        } else {
            pads[i] = total - floor_div(total, 2);
            pads[i + r] = floor_div(total, 2);
        }
    }
    return pads;
}

conv_geometry deconvolution::deconv_geom(const shape& x, const shape& w) const {
    check_conv_inputs(name(), x, w);
    const std::size_t r = x.ndim() - 2;
    conv_geometry g;
    g.batch = static_cast<std::int64_t>(x.lens()[0]);
    g.in_channels = static_cast<std::int64_t>(x.lens()[1]);
    g.group = group;
    if (group < 1 || g.in_channels % group != 0)
        throw_error(error_code::shape, name() + ": group " + std::to_string(group) + " must divide the " +
                                           std::to_string(g.in_channels) + " input channels of x " + x.to_string());
    if (static_cast<std::int64_t>(w.lens()[0]) != g.in_channels)
        throw_error(error_code::shape, name() + ": weights " + w.to_string() + " must have " +
                                           std::to_string(g.in_channels) + " rows (the input channels of x " +
                                           x.to_string() + ")");
    g.out_channels = static_cast<std::int64_t>(w.lens()[1]) * group;
    g.in = spatial_dims(x);
    g.kernel = spatial_dims(w);
    g.stride = spatial_attr(stride, r, 1, name(), "stride");
    g.dilation = spatial_attr(dilation, r, 1, name(), "dilation");
    auto op = spatial_attr(output_padding, r, 0, name(), "output_padding", false);
    auto pads = resolved_padding(g.in, g.kernel);
    g.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
    for (std::size_t i = 0; i < r; ++i) {
        const std::int64_t o =
            g.stride[i] * (g.in[i] - 1) + op[i] + (g.kernel[i] - 1) * g.dilation[i] + 1 - pads[i] - pads[i + r];
        if (o < 1)
            throw_error(error_code::shape, name() + ": output dimension " + std::to_string(i) + " would be " +
                                               std::to_string(o) + " for x " + x.to_string() + " and w " + w.to_string());
        g.out.push_back(o);
    }
    return g;
}

shape deconvolution::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2, 3);
    check_same_type(name(), inputs);
    if (!is_float_compute_type(inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported (float16, bfloat16, float32, float64)");
    auto g = deconv_geom(inputs[0], inputs[1]);
    if (inputs.size() == 3) check_conv_bias(name(), inputs[2], g.out_channels);
    std::vector<std::size_t> lens{static_cast<std::size_t>(g.batch), static_cast<std::size_t>(g.out_channels)};
    for (auto o : g.out) lens.push_back(static_cast<std::size_t>(o));
    return shape(inputs[0].get_type(), lens);
}

argument deconvolution::compute(const shape& out, const std::vector<argument>& args) const {
    auto g = deconv_geom(args[0].get_shape(), args[1].get_shape());
    return visit_float_compute(out.get_type(), name(), [&](auto tag) {
        using A = typename decltype(tag)::type;
        auto x = read_as<A>(args[0]);
        auto w = read_as<A>(args[1]);
        compute_buffer<A> b;
        if (args.size() == 3) b = read_as<A>(args[2]);
        return produce<A>(out, [&](A* y) { deconv_forward<A>(g, x.data(), w.data(), args.size() == 3 ? b.data() : nullptr, y); });
    });
}

KILN_REGISTER_OP(convolution)
KILN_REGISTER_OP(deconvolution)

}  // namespace kiln::op
