// Sequence and optional operators.
#include "onnx/onnx_node.hpp"
#include "ops/control_sequence.hpp"

#include <kiln/errors.hpp>

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_sequence_construct(onnx_node& node) {
    return {node.add(op::sequence_construct{}, node.present_inputs())};
}

std::vector<instruction_ref> parse_sequence_empty(onnx_node& node) {
    auto t = from_onnx_type(static_cast<int>(node.attr_int("dtype", 1)), node.describe() + " dtype");
    return {node.add(op::sequence_empty{t}, {})};
}

std::vector<instruction_ref> parse_sequence_at(onnx_node& node) {
    return {node.add(op::sequence_at{}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_sequence_insert(onnx_node& node) {
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    if (node.has_input(2)) args.push_back(node.input(2));
    return {node.add(op::sequence_insert{}, args)};
}

std::vector<instruction_ref> parse_sequence_erase(onnx_node& node) {
    std::vector<instruction_ref> args{node.input(0)};
    if (node.has_input(1)) args.push_back(node.input(1));
    return {node.add(op::sequence_erase{}, args)};
}

std::vector<instruction_ref> parse_sequence_length(onnx_node& node) {
    return {node.add(op::sequence_length{}, {node.input(0)})};
}

std::vector<instruction_ref> parse_split_to_sequence(onnx_node& node) {
    op::split_to_sequence s;
    s.axis = node.attr_int("axis", 0);
    s.keepdims = node.attr_int("keepdims", 1) != 0;
    std::vector<instruction_ref> args{node.input(0)};
    if (node.has_input(1)) {
        if (auto c = node.constant_input(1)) {
            s.has_split = true;
            s.split_scalar = c->get_shape().ndim() == 0;
            for (std::size_t i = 0; i < c->get_shape().elements(); ++i) s.split.push_back(c->get_int64(i));
        } else {
            args.push_back(node.input(1));
        }
    }
    return {node.add(s, args)};
}

std::vector<instruction_ref> parse_concat_from_sequence(onnx_node& node) {
    op::concat_from_sequence c;
    c.axis = node.attr_int("axis");
    c.new_axis = node.attr_int("new_axis", 0) != 0;
    return {node.add(c, {node.input(0)})};
}

std::vector<instruction_ref> parse_optional(onnx_node& node) {
    if (node.has_input(0)) return {node.add(op::make_optional{}, {node.input(0)})};
    if (!node.has_attr("type")) node.fail(error_code::parse, "an Optional without input needs the 'type' attribute");
    return {node.add(op::make_optional{node.attr_type("type")}, {})};
}

std::vector<instruction_ref> parse_optional_has_element(onnx_node& node) {
    // No input at all means an empty optional.
    if (!node.has_input(0)) return {node.add_literal(literal(false))};
    return {node.add(op::optional_has_element{}, {node.input(0)})};
}

std::vector<instruction_ref> parse_optional_get_element(onnx_node& node) {
    return {node.add(op::optional_get_element{}, {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("SequenceConstruct", parse_sequence_construct)
KILN_ONNX_OP("SequenceEmpty", parse_sequence_empty)
KILN_ONNX_OP("SequenceAt", parse_sequence_at)
KILN_ONNX_OP("SequenceInsert", parse_sequence_insert)
KILN_ONNX_OP("SequenceErase", parse_sequence_erase)
KILN_ONNX_OP("SequenceLength", parse_sequence_length)
KILN_ONNX_OP("SplitToSequence", parse_split_to_sequence)
KILN_ONNX_OP("ConcatFromSequence", parse_concat_from_sequence)
KILN_ONNX_OP("Optional", parse_optional)
KILN_ONNX_OP("OptionalHasElement", parse_optional_has_element)
KILN_ONNX_OP("OptionalGetElement", parse_optional_get_element)

}  // namespace kiln::onnx_frontend
