// Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv and CausalConvWithState.
#include "onnx/parse_nn_common.hpp"
#include "ops/nn_conv.hpp"
#include "ops/nn_conv_quant.hpp"
#include "ops/nn_deform_conv.hpp"

namespace kiln::onnx_frontend {

namespace {

// Kernel dims from the weights (static) or the kernel_shape attribute, which must agree.
std::vector<std::int64_t> kernel_dims(const onnx_node& node, const shape& w, std::size_t rank) {
    auto ks = node.attr_ints("kernel_shape", std::vector<std::int64_t>{});
    auto from_w = static_spatial(w);
    if (from_w && from_w->size() == rank) {
        if (!ks.empty() && ks != *from_w)
            node.fail(error_code::shape, "kernel_shape does not match the weights " + w.to_string());
        return *from_w;
    }
    if (ks.size() != rank)
        node.fail(error_code::shape, "the kernel size is unknown: weights " + w.to_string() + " and no kernel_shape");
    return ks;
}

template <class Op>
Op conv_op(const onnx_node& node, const shape& x, const shape& w) {
    const std::size_t r = spatial_rank(node, x);
    auto wa = read_window_attrs(node, x, r, kernel_dims(node, w, r));
    Op op;
    op.padding = wa.padding;
    op.stride = wa.stride;
    op.dilation = wa.dilation;
    op.padding_mode = wa.padding_mode;
    op.group = node.attr_int("group", 1);
    return op;
}

std::vector<instruction_ref> parse_conv(onnx_node& node) {
    auto x = node.input(0), w = node.input(1);
    auto op = conv_op<op::convolution>(node, x->get_shape(), w->get_shape());
    std::vector<instruction_ref> args{x, w};
    if (node.has_input(2)) args.push_back(node.input(2));
    return {node.add(op, args)};
}

std::vector<instruction_ref> parse_conv_transpose(onnx_node& node) {
    auto x = node.input(0), w = node.input(1);
    const shape& xs = x->get_shape();
    const std::size_t r = spatial_rank(node, xs);
    auto kernel = kernel_dims(node, w->get_shape(), r);
    // SAME_* for ConvTranspose is defined on the output size, so it is resolved below.
    auto wa = read_window_attrs(node, xs, r, kernel, false);
    op::deconvolution op;
    op.stride = wa.stride;
    op.dilation = wa.dilation;
    op.padding = wa.padding;
    op.padding_mode = wa.padding_mode;
    op.group = node.attr_int("group", 1);
    op.output_padding = op::spatial_attr(node.attr_ints("output_padding", std::vector<std::int64_t>{}), r, 0,
                                         "ConvTranspose", "output_padding", false);
    auto output_shape = node.attr_ints("output_shape", std::vector<std::int64_t>{});
    if (output_shape.size() == r + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    if (!output_shape.empty() && output_shape.size() != r)
        node.fail(error_code::shape, "output_shape must have one value per spatial dimension");
    op.output_size = output_shape;
    if (auto in = static_spatial(xs); in && (!op.output_size.empty() || op.padding_mode != op::pad_mode::explicit_pads)) {
        op.padding = op.resolved_padding(*in, kernel);
        op.output_size.clear();
        op.padding_mode = op::pad_mode::explicit_pads;
    }
    std::vector<instruction_ref> args{x, w};
    if (node.has_input(2)) args.push_back(node.input(2));
    return {node.add(op, args)};
}

// ConvInteger(x, w, x_zero_point?, w_zero_point?) -> int32.
std::vector<instruction_ref> parse_conv_integer(onnx_node& node) {
    auto x = node.input(0), w = node.input(1);
    auto op = conv_op<op::convolution_integer>(node, x->get_shape(), w->get_shape());
    op.has_x_zero_point = node.has_input(2);
    op.has_w_zero_point = node.has_input(3);
    std::vector<instruction_ref> args{x, w};
    if (node.has_input(2)) args.push_back(node.input(2));
    if (node.has_input(3)) args.push_back(node.input(3));
    return {node.add(op, args)};
}

// QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, B?).
std::vector<instruction_ref> parse_qlinear_conv(onnx_node& node) {
    auto x = node.input(0), w = node.input(3);
    auto op = conv_op<op::qlinear_convolution>(node, x->get_shape(), w->get_shape());
    std::vector<instruction_ref> args;
    for (std::size_t i = 0; i < 8; ++i) args.push_back(node.input(i));
    if (node.has_input(8)) args.push_back(node.input(8));
    return {node.add(op, args)};
}

// DeformConv(x, w, offset, B?, mask?).
std::vector<instruction_ref> parse_deform_conv(onnx_node& node) {
    auto x = node.input(0), w = node.input(1);
    auto op = conv_op<op::deformable_convolution>(node, x->get_shape(), w->get_shape());
    op.offset_group = node.attr_int("offset_group", 1);
    op.has_bias = node.has_input(3);
    op.has_mask = node.has_input(4);
    std::vector<instruction_ref> args{x, w, node.input(2)};
    if (node.has_input(3)) args.push_back(node.input(3));
    if (node.has_input(4)) args.push_back(node.input(4));
    return {node.add(op, args)};
}

// CausalConvWithState(input, weight, bias?, past_state?) -> (output, present_state).
std::vector<instruction_ref> parse_causal_conv(onnx_node& node) {
    op::causal_conv_with_state op;
    auto act = node.attr_string("activation", "none");
    if (act == "silu" || act == "swish") op.silu = true;
    else if (act != "none") node.fail(error_code::parse, "activation '" + act + "' is not one of none, silu, swish");
    op.has_bias = node.has_input(2);
    op.has_past_state = node.has_input(3);
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    if (node.has_input(2)) args.push_back(node.input(2));
    if (node.has_input(3)) args.push_back(node.input(3));
    auto t = node.add(op, args);
    return node.unpack(t, 2);
}

}  // namespace

KILN_ONNX_OP("Conv", parse_conv)
KILN_ONNX_OP("ConvTranspose", parse_conv_transpose)
KILN_ONNX_OP("ConvInteger", parse_conv_integer)
KILN_ONNX_OP("QLinearConv", parse_qlinear_conv)
KILN_ONNX_OP("DeformConv", parse_deform_conv)
KILN_ONNX_OP("CausalConvWithState", parse_causal_conv)

}  // namespace kiln::onnx_frontend
