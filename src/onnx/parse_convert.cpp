// Cast, CastLike and BitCast -> convert / bitcast.
#include "onnx/onnx_node.hpp"
#include "ops/convert.hpp"

#include <onnx/onnx_pb.h>

namespace kiln::onnx_frontend {

namespace {

e8m0_round parse_round_mode(onnx_node& node) {
    auto m = node.attr_string("round_mode", "up");
    if (m == "up") return e8m0_round::up;
    if (m == "down") return e8m0_round::down;
    if (m == "nearest") return e8m0_round::nearest;
    node.fail(error_code::parse, "round_mode must be \"up\", \"down\" or \"nearest\", got \"" + m + "\"");
}

instruction_ref add_convert(onnx_node& node, type to) {
    op::convert_op c;
    c.target_type = to;
    c.saturate = node.attr_int("saturate", 1) != 0;
    c.round_mode = parse_round_mode(node);
    auto x = node.input(0);
    if (x->get_shape().get_type() == to) return x;  // a cast to the same type changes nothing
    return node.add(c, {x});
}

// Cast-1 named the type with a string ("FLOAT"); later versions with the TensorProto enum.
type cast_target(onnx_node& node) {
    for (const auto& a : node.proto().attribute()) {
        if (a.name() != "to" || a.type() != onnx::AttributeProto::STRING) continue;
        onnx::TensorProto_DataType t{};
        if (!onnx::TensorProto_DataType_Parse(a.s(), &t))
            node.fail(error_code::parse, "attribute 'to' names no ONNX type: \"" + a.s() + "\"");
        return from_onnx_type(t, node.describe() + " attribute 'to'");
    }
    return from_onnx_type(static_cast<int>(node.attr_int("to")), node.describe() + " attribute 'to'");
}

std::vector<instruction_ref> parse_cast(onnx_node& node) { return {add_convert(node, cast_target(node))}; }

std::vector<instruction_ref> parse_cast_like(onnx_node& node) {
    return {add_convert(node, node.input(1)->get_shape().get_type())};
}

std::vector<instruction_ref> parse_bitcast(onnx_node& node) {
    op::bitcast_op b;
    b.target_type = from_onnx_type(static_cast<int>(node.attr_int("to")), node.describe() + " attribute 'to'");
    return {node.add(b, {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("Cast", parse_cast)
KILN_ONNX_OP("CastLike", parse_cast_like)
KILN_ONNX_OP("BitCast", parse_bitcast)

}  // namespace kiln::onnx_frontend
