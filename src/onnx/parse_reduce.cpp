// ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp and ReduceSumSquare, every opset: the axes attribute
// (ReduceSum < 13, the others < 18) and the axes input (constant -> static reduce op,
// otherwise the run-time-axes form), keepdims and noop_with_empty_axes.
#include "onnx/onnx_node.hpp"
#include "ops/common.hpp"
#include "ops/reduce.hpp"

#include <algorithm>

namespace kiln::onnx_frontend {

namespace {

template <class Op>
std::vector<instruction_ref> parse_reduce(onnx_node& node, std::int64_t axes_input_since) {
    Op op;
    op.keepdims = node.attr_int("keepdims", 1) != 0;
    op.noop_with_empty_axes = node.attr_int("noop_with_empty_axes", 0) != 0;
    auto x = node.input(0);
    std::vector<std::int64_t> axes;
    if (node.opset() >= axes_input_since) {
        if (node.has_input(1)) {
            auto c = node.constant_input(1);
            if (!c) return {node.add(op, {x, node.input(1)})};
            axes = op::to_int64_vector(*c);
        }
    } else {
        axes = node.attr_ints("axes", std::vector<std::int64_t>{});
    }
    const auto& xs = x->get_shape();
    if (xs.dynamic() && !xs.is_tensor()) node.fail(error_code::shape, "input must be a tensor");
    const std::size_t rank = xs.ndim();
    std::vector<std::size_t> norm;
    if (axes.empty()) {
        if (!op.noop_with_empty_axes)
            for (std::size_t i = 0; i < rank; ++i) norm.push_back(i);
    } else {
        norm = op::normalize_axes(axes, rank, node.describe());
        std::sort(norm.begin(), norm.end());
    }
    op.axes.assign(norm.begin(), norm.end());
    return {node.add(op, {x})};
}

template <class Op>
parse_fn reducer(std::int64_t since) {
    return [since](onnx_node& node) { return parse_reduce<Op>(node, since); };
}

}  // namespace

KILN_ONNX_OP("ReduceSum", reducer<op::reduce_sum>(13))
KILN_ONNX_OP("ReduceMean", reducer<op::reduce_mean>(18))
KILN_ONNX_OP("ReduceMax", reducer<op::reduce_max>(18))
KILN_ONNX_OP("ReduceMin", reducer<op::reduce_min>(18))
KILN_ONNX_OP("ReduceProd", reducer<op::reduce_prod>(18))
KILN_ONNX_OP("ReduceL1", reducer<op::reduce_l1>(18))
KILN_ONNX_OP("ReduceL2", reducer<op::reduce_l2>(18))
KILN_ONNX_OP("ReduceLogSum", reducer<op::reduce_log_sum>(18))
KILN_ONNX_OP("ReduceLogSumExp", reducer<op::reduce_log_sum_exp>(18))
KILN_ONNX_OP("ReduceSumSquare", reducer<op::reduce_sum_square>(18))

}  // namespace kiln::onnx_frontend
