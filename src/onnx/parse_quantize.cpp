// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and Dropout.
#include "onnx/onnx_node.hpp"
#include "ops/convert.hpp"
#include "ops/dropout.hpp"
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

// Opsets 1-11: ratio is an attribute and the op is an identity at inference (ONNX
// runtimes ignore the old is_test flag). Opset 12+: ratio and training_mode are inputs;
// training mode draws a mask, with NumPy's generator when `seed` is set.
std::vector<instruction_ref> parse_dropout(onnx_node& node) {
    auto x = node.input(0);
    const type t = x->get_shape().get_type();
    instruction_ref ratio, training;
    bool inference = true;
    if (node.opset() >= 12) {
        ratio = node.has_input(1) ? node.input(1)
                                  : node.add_literal(literal(shape(type::float32), std::vector<float>{0.5f}));
        if (node.has_input(2)) {
            auto c = node.constant_input(2);
            inference = c && c->get_int64(0) == 0;
            training = node.input(2);
        }
    } else {
        ratio = node.add_literal(literal(shape(type::float32), std::vector<float>{node.attr_float("ratio", 0.5f)}));
    }
    const bool want_mask = node.has_output(1);
    if (inference && !want_mask) return {x};
    if (inference) training = node.add_literal(literal(shape(type::bool_), std::vector<bool>{false}));
    op::dropout_op d;
    if (node.has_attr("seed")) d.seed = node.attr_int("seed");
    auto outs = node.unpack(node.add(d, {x, ratio, training}), 2);
    if (inference) outs[0] = x;
    // Dropout 7 to 9 gave the mask x's type; 10+ bool.
    if (want_mask && node.opset() < 10 && t != type::bool_) {
        op::convert_op c;
        c.target_type = t;
        outs[1] = node.add(c, {outs[1]});
    }
    return outs;
}

}  // namespace

KILN_ONNX_OP("QuantizeLinear", parse_quantize_linear)
KILN_ONNX_OP("DequantizeLinear", parse_dequantize_linear)
KILN_ONNX_OP("DynamicQuantizeLinear", parse_dynamic_quantize_linear)
KILN_ONNX_OP("Dropout", parse_dropout)

}  // namespace kiln::onnx_frontend
