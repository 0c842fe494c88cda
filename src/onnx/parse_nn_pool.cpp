// MaxPool, AveragePool, LpPool, their Global* forms, and MaxUnpool.
#include "onnx/parse_nn_common.hpp"
#include "ops/nn_pooling.hpp"

namespace kiln::onnx_frontend {

namespace {

op::pooling pool_op(const onnx_node& node, op::pooling_mode mode) {
    auto x = node.input(0);
    const std::size_t r = spatial_rank(node, x->get_shape());
    op::pooling op;
    op.mode = mode;
    op.lengths = op::spatial_attr(node.attr_ints("kernel_shape"), r, 1, node.op_type(), "kernel_shape");
    auto wa = read_window_attrs(node, x->get_shape(), r, op.lengths);
    op.stride = wa.stride;
    op.padding = wa.padding;
    op.dilation = wa.dilation;
    op.padding_mode = wa.padding_mode;
    op.ceil_mode = node.attr_int("ceil_mode", 0) != 0;
    return op;
}

std::vector<instruction_ref> parse_max_pool(onnx_node& node) {
    auto op = pool_op(node, op::pooling_mode::max);
    if (node.has_output(1)) {
        op::pooling_with_indices wi;
        static_cast<op::pooling&>(wi) = op;
        wi.storage_order = node.attr_int("storage_order", 0);
        return node.unpack(node.add(wi, {node.input(0)}), 2);
    }
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_average_pool(onnx_node& node) {
    auto op = pool_op(node, op::pooling_mode::average);
    op.count_include_pad = node.attr_int("count_include_pad", 0) != 0;
    return {node.add(op, {node.input(0)})};
}

std::int64_t lp_order(const onnx_node& node) {
    // LpPool-1 had a float p; later versions an int.
    if (node.opset() < 2 && node.has_attr("p")) return static_cast<std::int64_t>(node.attr_float("p"));
    return node.attr_int("p", 2);
}

std::vector<instruction_ref> parse_lp_pool(onnx_node& node) {
    auto op = pool_op(node, op::pooling_mode::lp);
    op.p = lp_order(node);
    return {node.add(op, {node.input(0)})};
}

// Global pooling: the window is the whole spatial extent, written as explicit lengths
// when that extent is static.
std::vector<instruction_ref> parse_global_pool(onnx_node& node, op::pooling_mode mode) {
    auto x = node.input(0);
    spatial_rank(node, x->get_shape());
    op::pooling op;
    op.mode = mode;
    if (mode == op::pooling_mode::lp) op.p = lp_order(node);
    if (auto in = static_spatial(x->get_shape())) op.lengths = *in;
    else op.global = true;
    return {node.add(op, {x})};
}

std::vector<instruction_ref> parse_max_unpool(onnx_node& node) {
    auto x = node.input(0);
    const std::size_t r = spatial_rank(node, x->get_shape());
    op::max_unpool op;
    op.lengths = op::spatial_attr(node.attr_ints("kernel_shape"), r, 1, "MaxUnpool", "kernel_shape");
    op.stride = op::spatial_attr(node.attr_ints("strides", std::vector<std::int64_t>{}), r, 1, "MaxUnpool", "strides");
    op.padding = op::padding_attr(node.attr_ints("pads", std::vector<std::int64_t>{}), r, "MaxUnpool");
    std::vector<instruction_ref> args{x, node.input(1)};
    if (node.has_input(2)) {
        if (auto c = node.constant_input(2)) op.output_size = op::to_int64_vector(*c);
        else args.push_back(node.input(2));
    }
    return {node.add(op, args)};
}

}  // namespace

KILN_ONNX_OP("MaxPool", parse_max_pool)
KILN_ONNX_OP("AveragePool", parse_average_pool)
KILN_ONNX_OP("LpPool", parse_lp_pool)
KILN_ONNX_OP("GlobalAveragePool", [](onnx_node& n) { return parse_global_pool(n, op::pooling_mode::average); })
KILN_ONNX_OP("GlobalMaxPool", [](onnx_node& n) { return parse_global_pool(n, op::pooling_mode::max); })
KILN_ONNX_OP("GlobalLpPool", [](onnx_node& n) { return parse_global_pool(n, op::pooling_mode::lp); })
KILN_ONNX_OP("MaxUnpool", parse_max_unpool)

}  // namespace kiln::onnx_frontend
