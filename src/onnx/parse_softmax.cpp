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
    // A dim is "wide" unless it is 1 in every run (a dynamic one may be anything).
    const auto dims = xs.to_dynamic_dims();
    std::size_t wide = 0, last = rank - 1;
    for (std::size_t i = axis; i < rank; ++i)
        if (!(dims[i].is_fixed() && dims[i].min == 1)) {
            ++wide;
            last = i;
        }
    if (wide <= 1) {
        op.axis = static_cast<std::int64_t>(last);
        return {node.add(op, {x})};
    }
    if (xs.dynamic()) {
        // Sizes known when it runs (PyTorch's exports before opset 13 with dynamic axes):
        // flatten at `axis`, normalize the rows, back to x's own shape.
        for (const char* needed : {"flatten", "shape_of", "reshape_dynamic"})
            if (!has_op(needed))
                node.fail(error_code::unsupported,
                          std::string("softmax over several dynamic dimensions needs the ") + needed + " op");
        auto to2d = node.add(make_op("flatten", {{"axis", static_cast<std::int64_t>(axis)}}), {x});
        op.axis = 1;
        auto y = node.add(op, {to2d});
        return {node.add(make_op("reshape_dynamic"), {y, node.add(make_op("shape_of"), {x})})};
    }
    const auto& lens = xs.lens();
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
