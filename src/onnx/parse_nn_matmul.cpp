// MatMul, Gemm, MatMulInteger and QLinearMatMul.
#include "onnx/onnx_node.hpp"
#include "ops/nn_matmul.hpp"

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_matmul(onnx_node& node) {
    return {node.add(op::matmul{}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_gemm(onnx_node& node) {
    op::gemm op;
    op.alpha = node.attr_float("alpha", 1.0f);
    op.beta = node.attr_float("beta", 1.0f);
    op.trans_a = node.attr_int("transA", 0) != 0;
    op.trans_b = node.attr_int("transB", 0) != 0;
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    // C is optional since opset 11; Gemm-1/6 `broadcast` is subsumed by always broadcasting.
    if (node.has_input(2)) args.push_back(node.input(2));
    return {node.add(op, args)};
}

std::vector<instruction_ref> parse_matmul_integer(onnx_node& node) {
    op::matmul_integer op;
    op.has_a_zero_point = node.has_input(2);
    op.has_b_zero_point = node.has_input(3);
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    if (node.has_input(2)) args.push_back(node.input(2));
    if (node.has_input(3)) args.push_back(node.input(3));
    return {node.add(op, args)};
}

std::vector<instruction_ref> parse_qlinear_matmul(onnx_node& node) {
    std::vector<instruction_ref> args;
    for (std::size_t i = 0; i < 8; ++i) args.push_back(node.input(i));
    return {node.add(op::qlinear_matmul{}, args)};
}

}  // namespace

KILN_ONNX_OP("MatMul", parse_matmul)
KILN_ONNX_OP("Gemm", parse_gemm)
KILN_ONNX_OP("MatMulInteger", parse_matmul_integer)
KILN_ONNX_OP("QLinearMatMul", parse_qlinear_matmul)

}  // namespace kiln::onnx_frontend
