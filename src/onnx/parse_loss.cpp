// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (all reductions, optional
// weights and ignore_index; SoftmaxCrossEntropyLoss's optional log_prob output).
#include "onnx/onnx_node.hpp"
#include "ops/loss.hpp"

namespace kiln::onnx_frontend {

namespace {

template <class Op>
Op loss_op(onnx_node& node) {
    Op op;
    op.reduction = node.attr_string("reduction", std::string("mean"));
    if (node.has_attr("ignore_index")) op.ignore_index = node.attr_int("ignore_index");
    return op;
}

std::vector<instruction_ref> loss_args(onnx_node& node) {
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    if (node.has_input(2)) args.push_back(node.input(2));
    return args;
}

std::vector<instruction_ref> parse_nll(onnx_node& node) {
    return {node.add(loss_op<op::nll_loss>(node), loss_args(node))};
}

std::vector<instruction_ref> parse_sce(onnx_node& node) {
    auto t = node.add(loss_op<op::softmax_cross_entropy_loss>(node), loss_args(node));
    return node.unpack(t, node.has_output(1) ? 2 : 1);
}

}  // namespace

KILN_ONNX_OP("NegativeLogLikelihoodLoss", parse_nll)
KILN_ONNX_OP("SoftmaxCrossEntropyLoss", parse_sce)

}  // namespace kiln::onnx_frontend
