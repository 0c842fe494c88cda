// LayerNormalization, RMSNormalization, BatchNormalization, InstanceNormalization,
// GroupNormalization, LpNormalization, MeanVarianceNormalization and LRN.
#include "onnx/onnx_node.hpp"
#include "ops/common.hpp"
#include "ops/normalization.hpp"

namespace kiln::onnx_frontend {

namespace {

std::int64_t norm_axis(onnx_node& node, std::int64_t fallback) {
    const auto rank = node.input(0)->get_shape().ndim();
    return static_cast<std::int64_t>(op::normalize_axis(node.attr_int("axis", fallback), rank, node.describe()));
}

// Y, and the training stash outputs Mean and InvStdDev when the model asks for them.
std::vector<instruction_ref> parse_layer_norm(onnx_node& node) {
    op::layer_norm op;
    op.axis = norm_axis(node, -1);
    op.epsilon = node.attr_float("epsilon", 1e-5f);
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    if (node.has_input(2)) args.push_back(node.input(2));
    std::vector<instruction_ref> out{node.add(op, args)};
    if (node.has_output(1) || node.has_output(2)) {
        // Mean and InvStdDev come in the stash type (ONNX default: float).
        const type stash = from_onnx_type(static_cast<int>(node.attr_int("stash_type", 1)), node.describe());
        auto stats = node.add(op::layer_norm_stats{op.axis, op.epsilon, stash}, {node.input(0)});
        auto parts = node.unpack(stats, 2);
        out.push_back(parts[0]);
        out.push_back(parts[1]);
    }
    return out;
}

std::vector<instruction_ref> parse_rms_norm(onnx_node& node) {
    op::rms_norm op;
    op.axis = norm_axis(node, -1);
    op.epsilon = node.attr_float("epsilon", 1e-5f);
    return {node.add(op, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_batch_norm(onnx_node& node) {
    const float eps = node.attr_float("epsilon", 1e-5f);
    std::vector<instruction_ref> args;
    for (std::size_t i = 0; i < 5; ++i) args.push_back(node.input(i));
    // Opset 14 added training_mode; before it a node asking for the running statistics
    // was a training node.
    bool training = node.opset() >= 14 ? node.attr_int("training_mode", 0) != 0
                                       : (node.has_output(1) || node.has_output(2));
    if (node.opset() < 14 && (node.has_output(3) || node.has_output(4)))
        node.fail(error_code::unsupported, "the saved_mean / saved_var outputs are not supported");
    if (!training) return {node.add(op::batch_norm_inference{eps}, args)};
    auto t = node.add(op::batch_norm_training{eps, node.attr_float("momentum", 0.9f)}, args);
    return node.unpack(t, 3);
}

std::vector<instruction_ref> parse_instance_norm(onnx_node& node) {
    return {node.add(op::instance_norm{node.attr_float("epsilon", 1e-5f)}, {node.input(0), node.input(1), node.input(2)})};
}

std::vector<instruction_ref> parse_group_norm(onnx_node& node) {
    op::group_norm op;
    op.num_groups = node.attr_int("num_groups");
    op.epsilon = node.attr_float("epsilon", 1e-5f);
    // GroupNormalization-18 took one scale/bias value per group; 21 takes one per channel.
    op.per_group_scale = node.opset() < 21;
    return {node.add(op, {node.input(0), node.input(1), node.input(2)})};
}

std::vector<instruction_ref> parse_lp_norm(onnx_node& node) {
    op::lp_norm op;
    op.axis = norm_axis(node, -1);
    op.p = node.attr_int("p", 2);
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_mvn(onnx_node& node) {
    op::mean_variance_norm op;
    const auto rank = node.input(0)->get_shape().ndim();
    auto axes = op::normalize_axes(node.attr_ints("axes", std::vector<std::int64_t>{0, 2, 3}), rank, node.describe());
    op.axes.assign(axes.begin(), axes.end());
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_lrn(onnx_node& node) {
    op::lrn op;
    op.alpha = node.attr_float("alpha", 1e-4f);
    op.beta = node.attr_float("beta", 0.75f);
    op.bias = node.attr_float("bias", 1.0f);
    op.size = node.attr_int("size");
    return {node.add(op, {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("LayerNormalization", parse_layer_norm)
KILN_ONNX_OP("RMSNormalization", parse_rms_norm)
KILN_ONNX_OP("BatchNormalization", parse_batch_norm)
KILN_ONNX_OP("InstanceNormalization", parse_instance_norm)
KILN_ONNX_OP("GroupNormalization", parse_group_norm)
KILN_ONNX_OP("LpNormalization", parse_lp_norm)
KILN_ONNX_OP("MeanVarianceNormalization", parse_mvn)
KILN_ONNX_OP("LRN", parse_lrn)

}  // namespace kiln::onnx_frontend
