// Constant and Identity: no computation, only values.
#include "onnx/onnx_node.hpp"

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_constant(onnx_node& node) {
    if (node.has_attr("value")) return {node.add_literal(node.attr_tensor("value"))};
    if (node.has_attr("value_float")) return {node.add_literal(literal(node.attr_float("value_float")))};
    if (node.has_attr("value_int")) return {node.add_literal(literal(node.attr_int("value_int")))};
    if (node.has_attr("value_floats")) {
        auto v = node.attr_floats("value_floats");
        return {node.add_literal(literal(shape(type::float32, {v.size()}), v))};
    }
    if (node.has_attr("value_ints")) {
        auto v = node.attr_ints("value_ints");
        return {node.add_literal(literal(shape(type::int64, {v.size()}), v))};
    }
    if (node.has_attr("value_string"))
        return {node.add_literal(literal(shape(type::string), std::vector<std::string>{node.attr_string("value_string")}))};
    if (node.has_attr("value_strings")) {
        auto v = node.attr_strings("value_strings");
        return {node.add_literal(literal(shape(type::string, {v.size()}), v))};
    }
    if (node.has_attr("sparse_value")) node.fail(error_code::unsupported, "sparse constants are not supported");
    node.fail(error_code::parse, "has no value attribute");
}

// Identity passes its input through (tensors, sequences and optionals alike); the
// output name simply refers to the same instruction.
std::vector<instruction_ref> parse_identity(onnx_node& node) { return {node.input(0)}; }

}  // namespace

KILN_ONNX_OP("Constant", parse_constant)
KILN_ONNX_OP("Identity", parse_identity)

}  // namespace kiln::onnx_frontend
