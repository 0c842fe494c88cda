// Softmax, LogSoftmax and Hardmax. Opset >= 13 normalizes along one axis (default -1).
// Older opsets coerce the input to 2-D at `axis` (default 1) and normalize each row,
// i.e. over all dimensions from `axis` on: that is the one-axis op whenever at most
// one of those dimensions is larger than 1, and reshape + op + reshape otherwise.
#include "onnx/onnx_node.hpp"
#include "ops/common.hpp"
#include "ops/softmax.hpp"

namespace kiln::onnx_frontend {

namespace {

template <class Op>
std::vector<instruction_ref> parse_softmax(onnx_node& node) {
    auto x = node.input(0);
    const auto& xs = x->get_shape();
    const std::size_t rank = xs.ndim();
    if (rank == 0) node.fail(error_code::shape, "input must have rank >= 1");
    Op op;
    if (node.opset() >= 13) {
        op.axis = static_cast<std::int64_t>(op::normalize_axis(node.attr_int("axis", -1), rank, node.describe()));
        return {node.add(op, {x})};
    }
    const auto axis = op::normalize_axis(node.attr_int("axis", 1), rank, node.describe());
    if (xs.dynamic()) node.fail(error_code::unsupported, "needs a static input shape before opset 13");
    const auto& lens = xs.lens();
    std::size_t wide = 0, last = rank - 1;
    for (std::size_t i = axis; i < rank; ++i)
        if (lens[i] != 1) {
            ++wide;
            last = i;
        }
    if (wide <= 1) {
        op.axis = static_cast<std::int64_t>(last);
        return {node.add(op, {x})};
    }
    std::size_t rows = 1, cols = 1;
    for (std::size_t i = 0; i < rank; ++i) (i < axis ? rows : cols) *= lens[i];
    if (!has_op("reshape"))
        node.fail(error_code::unsupported, "flattening softmax over several dimensions needs the reshape op");
    auto to2d = node.add(make_op("reshape", {{"dims", value::array{value(static_cast<std::int64_t>(rows)), value(static_cast<std::int64_t>(cols))}}}), {x});
    op.axis = 1;
    auto y = node.add(op, {to2d});
    value::array back;
    for (auto l : lens) back.push_back(value(static_cast<std::int64_t>(l)));
    return {node.add(make_op("reshape", {{"dims", back}}), {y})};
}

}  // namespace

KILN_ONNX_OP("Softmax", parse_softmax<op::softmax>)
KILN_ONNX_OP("LogSoftmax", parse_softmax<op::log_softmax>)
KILN_ONNX_OP("Hardmax", parse_softmax<op::hardmax>)

}  // namespace kiln::onnx_frontend
