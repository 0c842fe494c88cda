// QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear.
#include "onnx/onnx_node.hpp"
#include "ops/quantize.hpp"

namespace kiln::onnx_frontend {

namespace {

std::optional<type> type_attr(onnx_node& node, const std::string& name) {
    if (!node.has_attr(name) || node.attr_int(name) == 0) return std::nullopt;
    return from_onnx_type(static_cast<int>(node.attr_int(name)), node.describe() + " attribute '" + name + "'");
}

std::vector<instruction_ref> parse_quantize_linear(onnx_node& node) {
    op::quantize_linear_op q;
    q.axis = node.attr_int("axis", 1);
    q.block_size = node.attr_int("block_size", 0);
    q.saturate = node.attr_int("saturate", 1) != 0;
    auto out = type_attr(node, "output_dtype");
    q.precision = type_attr(node, "precision");
    if (node.has_input(2)) {
        const type zt = node.input(2)->get_shape().get_type();
        if (out && *out != zt)
            node.fail(error_code::type, "output_dtype " + std::string(type_name(*out)) +
                                            " differs from the zero point's type " + std::string(type_name(zt)));
        q.output_type = zt;
        return {node.add(q, {node.input(0), node.input(1), node.input(2)})};
    }
    q.output_type = out.value_or(type::uint8);
    return {node.add(q, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_dequantize_linear(onnx_node& node) {
    op::dequantize_linear_op d;
    d.axis = node.attr_int("axis", 1);
    d.block_size = node.attr_int("block_size", 0);
    d.output_type = type_attr(node, "output_dtype");
    if (node.has_input(2)) return {node.add(d, {node.input(0), node.input(1), node.input(2)})};
    return {node.add(d, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_dynamic_quantize_linear(onnx_node& node) {
    return node.unpack(node.add(op::dynamic_quantize_linear_op{}, {node.input(0)}), 3);
}

}  // namespace

KILN_ONNX_OP("QuantizeLinear", parse_quantize_linear)
KILN_ONNX_OP("DequantizeLinear", parse_dequantize_linear)
KILN_ONNX_OP("DynamicQuantizeLinear", parse_dynamic_quantize_linear)

}  // namespace kiln::onnx_frontend
