// Einsum, Det, GridSample, AffineGrid, RoiAlign and NonMaxSuppression.
#include "onnx/onnx_node.hpp"
#include "ops/nn_detection.hpp"
#include "ops/nn_einsum.hpp"
#include "ops/nn_grid.hpp"

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_einsum(onnx_node& node) {
    op::einsum op;
    op.equation = node.attr_string("equation");
    return {node.add(op, node.present_inputs())};
}

std::vector<instruction_ref> parse_det(onnx_node& node) { return {node.add(op::det{}, {node.input(0)})}; }

std::vector<instruction_ref> parse_grid_sample(onnx_node& node) {
    op::grid_sample op;
    // GridSample-16 spelled the modes bilinear/bicubic; 20 renamed them linear/cubic.
    const auto mode = node.attr_string("mode", node.opset() < 20 ? "bilinear" : "linear");
    if (mode == "linear" || mode == "bilinear") op.mode = op::grid_mode::linear;
    else if (mode == "nearest") op.mode = op::grid_mode::nearest;
    else if (mode == "cubic" || mode == "bicubic") op.mode = op::grid_mode::cubic;
    else node.fail(error_code::parse, "mode '" + mode + "' is not one of linear, nearest, cubic");
    const auto pad = node.attr_string("padding_mode", "zeros");
    if (pad == "zeros") op.padding_mode = op::grid_padding::zeros;
    else if (pad == "border") op.padding_mode = op::grid_padding::border;
    else if (pad == "reflection") op.padding_mode = op::grid_padding::reflection;
    else node.fail(error_code::parse, "padding_mode '" + pad + "' is not one of zeros, border, reflection");
    op.align_corners = node.attr_int("align_corners", 0) != 0;
    return {node.add(op, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_affine_grid(onnx_node& node) {
    op::affine_grid op;
    op.align_corners = node.attr_int("align_corners", 0) != 0;
    if (auto c = node.constant_input(1)) {
        op.size = op::to_int64_vector(*c);
        return {node.add(op, {node.input(0)})};
    }
    return {node.add(op, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_roi_align(onnx_node& node) {
    op::roi_align op;
    const auto mode = node.attr_string("mode", "avg");
    if (mode != "avg" && mode != "max") node.fail(error_code::parse, "mode '" + mode + "' is not avg or max");
    op.max_mode = mode == "max";
    op.output_height = node.attr_int("output_height", 1);
    op.output_width = node.attr_int("output_width", 1);
    op.sampling_ratio = node.attr_int("sampling_ratio", 0);
    op.spatial_scale = node.attr_float("spatial_scale", 1.0f);
    // RoiAlign-10 had no coordinate_transformation_mode and behaved as output_half_pixel.
    const auto ctm = node.attr_string("coordinate_transformation_mode", node.opset() < 16 ? "output_half_pixel" : "half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
        node.fail(error_code::parse, "coordinate_transformation_mode '" + ctm + "' is not half_pixel or output_half_pixel");
    op.half_pixel = ctm == "half_pixel";
    return {node.add(op, {node.input(0), node.input(1), node.input(2)})};
}

std::vector<instruction_ref> parse_nms(onnx_node& node) {
    op::nonmax_suppression op;
    op.center_point_box = node.attr_int("center_point_box", 0) != 0;
    op.has_max_output = node.has_input(2);
    op.has_iou_threshold = node.has_input(3);
    op.has_score_threshold = node.has_input(4);
    return {node.add(op, node.present_inputs())};
}

}  // namespace

KILN_ONNX_OP("Einsum", parse_einsum)
KILN_ONNX_OP("Det", parse_det)
KILN_ONNX_OP("GridSample", parse_grid_sample)
KILN_ONNX_OP("AffineGrid", parse_affine_grid)
KILN_ONNX_OP("RoiAlign", parse_roi_align)
KILN_ONNX_OP("NonMaxSuppression", parse_nms)

}  // namespace kiln::onnx_frontend
