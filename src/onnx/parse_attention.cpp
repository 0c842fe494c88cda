// Attention (opset 23/24), RotaryEmbedding (23) and LinearAttention (27).
#include "onnx/onnx_node.hpp"
#include "ops/attention.hpp"

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_attention(onnx_node& node) {
    op::attention op;
    op.is_causal = node.attr_int("is_causal", 0) != 0;
    op.q_num_heads = node.attr_int("q_num_heads", 0);
    op.kv_num_heads = node.attr_int("kv_num_heads", 0);
    if (node.has_attr("scale")) op.scale = node.attr_float("scale");
    op.softcap = node.attr_float("softcap", 0.0f);
    op.qk_matmul_output_mode = node.attr_int("qk_matmul_output_mode", 0);
    if (op.qk_matmul_output_mode < 0 || op.qk_matmul_output_mode > 3)
        node.fail(error_code::unsupported, "qk_matmul_output_mode must be 0..3, got " +
                                               std::to_string(op.qk_matmul_output_mode));
    std::vector<instruction_ref> args{node.input(0), node.input(1), node.input(2)};
    op.has_mask = node.has_input(3);
    if (op.has_mask) args.push_back(node.input(3));
    if (node.has_input(4) != node.has_input(5))
        node.fail(error_code::parse, "past_key and past_value must be given together");
    op.has_past = node.has_input(4);
    if (op.has_past) {
        args.push_back(node.input(4));
        args.push_back(node.input(5));
    }
    op.has_nonpad = node.has_input(6);
    if (op.has_nonpad) args.push_back(node.input(6));
    return node.unpack(node.add(op, args), 4);
}

std::vector<instruction_ref> parse_rotary(onnx_node& node) {
    op::rotary_embedding op;
    op.interleaved = node.attr_int("interleaved", 0) != 0;
    op.num_heads = node.attr_int("num_heads", 0);
    op.rotary_embedding_dim = node.attr_int("rotary_embedding_dim", 0);
    std::vector<instruction_ref> args{node.input(0), node.input(1), node.input(2)};
    if (node.has_input(3)) args.push_back(node.input(3));
    return {node.add(op, args)};
}

std::vector<instruction_ref> parse_linear_attention(onnx_node& node) {
    op::linear_attention op;
    op.q_num_heads = node.attr_int("q_num_heads");
    op.kv_num_heads = node.attr_int("kv_num_heads");
    op.scale = node.attr_float("scale", 0.0f);
    op.update_rule = node.attr_string("update_rule", std::string("gated_delta"));
    std::vector<instruction_ref> args{node.input(0), node.input(1), node.input(2)};
    op.has_past = node.has_input(3);
    if (op.has_past) args.push_back(node.input(3));
    if (op.gated() != node.has_input(4))
        node.fail(error_code::parse, "update_rule '" + op.update_rule + "' " + (op.gated() ? "needs" : "forbids") +
                                         " the decay input");
    if (op.delta() != node.has_input(5))
        node.fail(error_code::parse, "update_rule '" + op.update_rule + "' " + (op.delta() ? "needs" : "forbids") +
                                         " the beta input");
    if (node.has_input(6)) node.fail(error_code::unsupported, "the erase_gate input is not supported");
    if (op.gated()) args.push_back(node.input(4));
    if (op.delta()) args.push_back(node.input(5));
    return node.unpack(node.add(op, args), 2);
}

// The modifier bodies become sub-modules; their captured outer values become extra
// inputs of the op, score_mod's first.
std::vector<instruction_ref> parse_flex_attention(onnx_node& node) {
    op::flex_attention op;
    if (node.has_attr("scale")) op.scale = node.attr_float("scale");
    if (node.has_attr("mask_mod")) node.fail(error_code::unsupported, "the mask_mod attribute is not supported");
    std::vector<instruction_ref> args{node.input(0), node.input(1), node.input(2)};
    const auto& q = node.input(0)->get_shape();
    const auto& k = node.input(1)->get_shape();
    if (q.dynamic() || k.dynamic() || q.ndim() != 4 || k.ndim() != 4)
        node.fail(error_code::shape, "Q and K must be static 4-D tensors");
    const shape scores(q.get_type(), {q.lens()[0], q.lens()[1], q.lens()[2], k.lens()[2]});
    std::vector<module_ref> mods;
    auto add_body = [&](const std::string& attr, std::vector<std::string>& params) {
        if (!node.has_attr(attr)) return;
        auto g = node.attr_graph(attr, {scores});
        if (g.input_names.size() != 1 || g.output_names.size() != 1)
            node.fail(error_code::parse, attr + " must have one input and one output");
        params.push_back(g.input_names[0]);
        for (std::size_t i = 0; i < g.captured.size(); ++i) {
            params.push_back(g.captured_names[i]);
            args.push_back(g.captured[i]);
        }
        mods.push_back(g.mod);
    };
    add_body("score_mod", op.score_params);
    add_body("prob_mod", op.prob_params);
    return {node.add(op, args, mods)};
}

}  // namespace

KILN_ONNX_OP_DOMAIN("ai.onnx.preview", "FlexAttention", parse_flex_attention)
KILN_ONNX_OP("Attention", parse_attention)
KILN_ONNX_OP("RotaryEmbedding", parse_rotary)
KILN_ONNX_OP("LinearAttention", parse_linear_attention)

}  // namespace kiln::onnx_frontend
