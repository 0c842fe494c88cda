// ONNX indexing and selection operators: Gather*, Scatter*, TensorScatter, OneHot,
// Compress, NonZero, Unique, TopK, ArgMax/ArgMin, CumSum/CumProd, ReverseSequence,
// Range, EyeLike, Trilu, DepthToSpace, SpaceToDepth.
#include "onnx/parse_tensor_common.hpp"
#include "ops/tensor_gather.hpp"
#include "ops/tensor_generate.hpp"
#include "ops/tensor_layout.hpp"
#include "ops/tensor_scan.hpp"
#include "ops/tensor_select.hpp"
#include "ops/tensor_views.hpp"

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_gather(onnx_node& node) {
    return {node.add(op::gather{node.attr_int("axis", 0)}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_gather_elements(onnx_node& node) {
    return {node.add(op::gather_elements{node.attr_int("axis", 0)}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_gather_nd(onnx_node& node) {
    return {node.add(op::gather_nd{node.attr_int("batch_dims", 0)}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_scatter_elements(onnx_node& node) {
    op::scatter_elements s{node.attr_int("axis", 0), node.attr_string("reduction", "none")};
    return {node.add(s, {node.input(0), node.input(1), node.input(2)})};
}

std::vector<instruction_ref> parse_scatter_nd(onnx_node& node) {
    op::scatter_nd s{node.attr_string("reduction", "none")};
    return {node.add(s, {node.input(0), node.input(1), node.input(2)})};
}

std::vector<instruction_ref> parse_tensor_scatter(onnx_node& node) {
    op::tensor_scatter s{node.attr_int("axis", -2), node.attr_string("mode", "linear")};
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    if (node.has_input(2)) args.push_back(node.input(2));
    return {node.add(s, args)};
}

std::vector<instruction_ref> parse_one_hot(onnx_node& node) {
    auto axis = node.attr_int("axis", -1);
    if (auto depth = node.constant_input(1))
        return {node.add(op::one_hot{axis, op::read_depth(*depth, "OneHot")}, {node.input(0), node.input(2)})};
    return {node.add(op::one_hot_dynamic{axis}, {node.input(0), node.input(1), node.input(2)})};
}

std::vector<instruction_ref> parse_compress(onnx_node& node) {
    std::optional<std::int64_t> axis;
    if (node.has_attr("axis")) axis = node.attr_int("axis");
    auto x = node.input(0);
    auto cond = node.constant_input(1);
    if (!cond || x->get_shape().dynamic()) return add_or_fold(node, op::compress{axis}, {x, node.input(1)});
    // A known condition: a gather of the selected positions.
    if (!axis) x = node.add(op::reshape{{-1}, false}, {x});
    auto a = axis ? op::normalize_axis(*axis, x->get_shape().ndim(), "Compress") : 0;
    auto idx = op::compress_indices(*cond, x->get_shape().lens()[a], "Compress");
    auto ind = node.add_literal(literal(shape(type::int64, {idx.size()}), idx));
    return {node.add(op::gather{static_cast<std::int64_t>(a)}, {x, ind})};
}

std::vector<instruction_ref> parse_nonzero(onnx_node& node) { return add_or_fold(node, op::nonzero{}, {node.input(0)}); }

std::vector<instruction_ref> parse_unique(onnx_node& node) {
    op::unique u;
    if (node.has_attr("axis")) u.axis = node.attr_int("axis");
    u.sorted = node.attr_int("sorted", 1) != 0;
    return add_or_fold(node, u, {node.input(0)}, 4);
}

std::vector<instruction_ref> parse_topk(onnx_node& node) {
    auto axis = node.attr_int("axis", -1);
    bool largest = node.attr_int("largest", 1) != 0;
    bool sorted = node.attr_int("sorted", 1) != 0;
    std::optional<std::vector<std::int64_t>> k;
    if (node.opset() < 10) k = std::vector<std::int64_t>{node.attr_int("k")};
    else k = constant_ints(node, 1);
    if (k) {
        if (k->size() != 1) node.fail(error_code::shape, "k must hold one value");
        return node.unpack(node.add(op::topk{axis, (*k)[0], largest, sorted}, {node.input(0)}), 2);
    }
    return node.unpack(node.add(op::topk_dynamic{axis, largest, sorted}, {node.input(0), node.input(1)}), 2);
}

template <class Op>
std::vector<instruction_ref> parse_arg_reduce(onnx_node& node) {
    Op o{node.attr_int("axis", 0), node.attr_int("keepdims", 1) != 0, node.attr_int("select_last_index", 0) != 0};
    return {node.add(o, {node.input(0)})};
}

template <class Op>
std::vector<instruction_ref> parse_cumulative(onnx_node& node) {
    Op o{node.attr_int("exclusive", 0) != 0, node.attr_int("reverse", 0) != 0};
    return {node.add(o, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_reverse_sequence(onnx_node& node) {
    op::reverse_sequence r{node.attr_int("batch_axis", 1), node.attr_int("time_axis", 0)};
    return {node.add(r, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_range(onnx_node& node) {
    return add_or_fold(node, op::range{}, {node.input(0), node.input(1), node.input(2)});
}

std::vector<instruction_ref> parse_eye_like(onnx_node& node) {
    op::eye_like e;
    e.k = node.attr_int("k", 0);
    if (node.has_attr("dtype")) e.dtype = from_onnx_type(static_cast<int>(node.attr_int("dtype")), node.describe());
    return {node.add(e, {node.input(0)})};
}

std::vector<instruction_ref> parse_trilu(onnx_node& node) {
    std::vector<instruction_ref> args{node.input(0)};
    if (node.has_input(1)) args.push_back(node.input(1));
    return {node.add(op::trilu{node.attr_int("upper", 1) != 0}, args)};
}

std::vector<instruction_ref> parse_depth_to_space(onnx_node& node) {
    op::depth_to_space d{node.attr_int("blocksize"), node.attr_string("mode", "DCR")};
    return {node.add(d, {node.input(0)})};
}

std::vector<instruction_ref> parse_space_to_depth(onnx_node& node) {
    return {node.add(op::space_to_depth{node.attr_int("blocksize")}, {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("Gather", parse_gather)
KILN_ONNX_OP("GatherElements", parse_gather_elements)
KILN_ONNX_OP("GatherND", parse_gather_nd)
KILN_ONNX_OP("Scatter", parse_scatter_elements)
KILN_ONNX_OP("ScatterElements", parse_scatter_elements)
KILN_ONNX_OP("ScatterND", parse_scatter_nd)
KILN_ONNX_OP("TensorScatter", parse_tensor_scatter)
KILN_ONNX_OP("OneHot", parse_one_hot)
KILN_ONNX_OP("Compress", parse_compress)
KILN_ONNX_OP("NonZero", parse_nonzero)
KILN_ONNX_OP("Unique", parse_unique)
KILN_ONNX_OP("TopK", parse_topk)
KILN_ONNX_OP("ArgMax", parse_arg_reduce<op::argmax>)
KILN_ONNX_OP("ArgMin", parse_arg_reduce<op::argmin>)
KILN_ONNX_OP("CumSum", parse_cumulative<op::cumsum>)
KILN_ONNX_OP("CumProd", parse_cumulative<op::cumprod>)
KILN_ONNX_OP("ReverseSequence", parse_reverse_sequence)
KILN_ONNX_OP("Range", parse_range)
KILN_ONNX_OP("EyeLike", parse_eye_like)
KILN_ONNX_OP("Trilu", parse_trilu)
KILN_ONNX_OP("DepthToSpace", parse_depth_to_space)
KILN_ONNX_OP("SpaceToDepth", parse_space_to_depth)

}  // namespace kiln::onnx_frontend
