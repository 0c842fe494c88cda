// ONNX shape and view operators: Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
// Expand, Shape, Size, ConstantOfShape. Known shape values give static ops; Shape and
// Size of static tensors are literals, so exporter shape arithmetic folds.
#include "onnx/parse_tensor_common.hpp"
#include "ops/tensor_generate.hpp"
#include "ops/tensor_views.hpp"

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_reshape(onnx_node& node) {
    bool allowzero = node.attr_int("allowzero", 0) != 0;
    if (node.opset() < 5) return {node.add(op::reshape{node.attr_ints("shape"), false}, {node.input(0)})};
    if (auto dims = constant_ints(node, 1)) return {node.add(op::reshape{*dims, allowzero}, {node.input(0)})};
    return {node.add(op::reshape_dynamic{allowzero}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_flatten(onnx_node& node) {
    return {node.add(op::flatten{node.attr_int("axis", 1)}, {node.input(0)})};
}

// Squeeze and Unsqueeze: axes are an attribute before opset 13, an input from 13 on.
template <bool Unsqueeze>
std::vector<instruction_ref> parse_squeeze(onnx_node& node) {
    auto make = [](std::vector<std::int64_t> axes) -> operation {
        if constexpr (Unsqueeze) return op::unsqueeze{std::move(axes)};
        else return op::squeeze{std::move(axes)};
    };
    if (node.opset() < 13) return {node.add(make(node.attr_ints("axes", std::vector<std::int64_t>{})), {node.input(0)})};
    if (!node.has_input(1)) {
        if (Unsqueeze) node.fail(error_code::parse, "the axes input is required");
        return {node.add(make({}), {node.input(0)})};
    }
    if (auto axes = constant_ints(node, 1)) return {node.add(make(*axes), {node.input(0)})};
    return {node.add(op::squeeze_dynamic{Unsqueeze}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_transpose(onnx_node& node) {
    return {node.add(op::transpose{node.attr_ints("perm", std::vector<std::int64_t>{})}, {node.input(0)})};
}

std::vector<instruction_ref> parse_expand(onnx_node& node) {
    if (auto dims = constant_ints(node, 1)) return {node.add(op::broadcast{*dims}, {node.input(0)})};
    return {node.add(op::expand_dynamic{}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_shape(onnx_node& node) {
    op::shape_of s{node.attr_int("start", 0), std::nullopt};
    if (node.has_attr("end")) s.end = node.attr_int("end");
    const auto& in = node.input(0)->get_shape();
    if (!in.is_tensor()) node.fail(error_code::shape, "input is not a tensor: " + in.to_string());
    if (auto dims = s.known_dims(in)) return {node.add_literal(literal(shape(type::int64, {dims->size()}), *dims))};
    return {node.add(s, {node.input(0)})};
}

std::vector<instruction_ref> parse_size(onnx_node& node) {
    const auto& in = node.input(0)->get_shape();
    if (in.is_tensor() && !in.dynamic())
        return {node.add_literal(literal(static_cast<std::int64_t>(in.elements())))};
    return {node.add(op::size_of{}, {node.input(0)})};
}

std::vector<instruction_ref> parse_constant_of_shape(onnx_node& node) {
    literal value = node.has_attr("value") ? node.attr_tensor("value") : literal(0.0f);
    if (value.get_shape().elements() != 1)
        node.fail(error_code::shape, "value must hold exactly one element, got " + value.get_shape().to_string());
    if (auto dims = constant_ints(node, 0)) {
        // A known shape: a stride-0 view of one element, which needs no memory.
        auto scalar = node.add_literal(literal(value.get_argument().reshape(shape(value.get_shape().get_type()))));
        return {node.add(op::broadcast{*dims}, {scalar})};
    }
    return {node.add(op::constant_of_shape{value}, {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("Reshape", parse_reshape)
KILN_ONNX_OP("Flatten", parse_flatten)
KILN_ONNX_OP("Squeeze", parse_squeeze<false>)
KILN_ONNX_OP("Unsqueeze", parse_squeeze<true>)
KILN_ONNX_OP("Transpose", parse_transpose)
KILN_ONNX_OP("Expand", parse_expand)
KILN_ONNX_OP("Shape", parse_shape)
KILN_ONNX_OP("Size", parse_size)
KILN_ONNX_OP("ConstantOfShape", parse_constant_of_shape)

}  // namespace kiln::onnx_frontend
