// ONNX Resize (every opset), Upsample and Col2Im.
#include "onnx/parse_tensor_common.hpp"
#include "ops/tensor_layout.hpp"
#include "ops/tensor_resize.hpp"

namespace kiln::onnx_frontend {

namespace {

std::string interpolation_mode(const onnx_node& node) {
    auto m = node.attr_string("mode", "nearest");
    if (m == "bilinear" || m == "trilinear") return "linear";
    return m;
}

// Resize-10 and Upsample: asymmetric coordinates, and nearest rounds down when enlarging.
op::resize_options legacy_options(const onnx_node& node) {
    op::resize_options o;
    o.mode = interpolation_mode(node);
    o.coordinate_transformation_mode = "asymmetric";
    o.nearest_mode = "simple";
    return o;
}

std::vector<instruction_ref> add_resize(onnx_node& node, const op::resize_options& o, std::optional<std::size_t> roi_idx,
                                        std::size_t value_idx, bool use_sizes) {
    auto x = node.input(0);
    bool has_roi = roi_idx && node.has_input(*roi_idx) && !is_empty_input(node, *roi_idx) &&
                   o.coordinate_transformation_mode == "tf_crop_and_resize";
    if (auto v = node.constant_input(value_idx)) {
        op::resize r{o, {}, {}};
        if (use_sizes) r.sizes = v->to_vector<std::int64_t>();
        else r.scales = v->to_vector<double>();
        std::vector<instruction_ref> args{x};
        if (has_roi) args.push_back(node.input(*roi_idx));
        return {node.add(r, args)};
    }
    std::vector<instruction_ref> args{x};
    if (has_roi) args.push_back(node.input(*roi_idx));
    args.push_back(node.input(value_idx));
    return {node.add(op::resize_dynamic{o, has_roi, use_sizes}, args)};
}

std::vector<instruction_ref> parse_resize(onnx_node& node) {
    if (node.opset() < 11) return add_resize(node, legacy_options(node), std::nullopt, 1, false);
    op::resize_options o;
    o.mode = interpolation_mode(node);
    o.coordinate_transformation_mode = node.attr_string("coordinate_transformation_mode", "half_pixel");
    o.nearest_mode = node.attr_string("nearest_mode", "round_prefer_floor");
    o.cubic_coeff_a = node.attr_float("cubic_coeff_a", -0.75f);
    o.exclude_outside = node.attr_int("exclude_outside", 0) != 0;
    o.extrapolation_value = node.attr_float("extrapolation_value", 0.0f);
    o.antialias = node.attr_int("antialias", 0) != 0;
    o.axes = node.attr_ints("axes", std::vector<std::int64_t>{});
    o.keep_aspect_ratio_policy = node.attr_string("keep_aspect_ratio_policy", "stretch");
    o.validate(node.describe());
    bool use_sizes = node.has_input(3) && !is_empty_input(node, 3);
    if (!use_sizes && (!node.has_input(2) || is_empty_input(node, 2)))
        node.fail(error_code::parse, "needs either scales or sizes");
    return add_resize(node, o, 1, use_sizes ? 3 : 2, use_sizes);
}

std::vector<instruction_ref> parse_upsample(onnx_node& node) {
    auto o = legacy_options(node);
    if (node.opset() < 7) {
        // Upsample-1: 4-D input, height_scale and width_scale attributes.
        std::vector<double> s{1, 1, node.attr_float("height_scale"), node.attr_float("width_scale")};
        return {node.add(op::resize{o, s, {}}, {node.input(0)})};
    }
    if (node.opset() < 9) {
        auto s = node.attr_floats("scales");
        op::resize r{o, std::vector<double>(s.begin(), s.end()), {}};
        return {node.add(r, {node.input(0)})};
    }
    return add_resize(node, o, std::nullopt, 1, false);
}

std::vector<instruction_ref> parse_col2im(onnx_node& node) {
    auto dil = node.attr_ints("dilations", std::vector<std::int64_t>{});
    auto pads = node.attr_ints("pads", std::vector<std::int64_t>{});
    auto strides = node.attr_ints("strides", std::vector<std::int64_t>{});
    auto image = constant_ints(node, 1);
    auto block = constant_ints(node, 2);
    if (image && block) return {node.add(op::col2im{*image, *block, dil, pads, strides}, {node.input(0)})};
    return {node.add(op::col2im_dynamic{dil, pads, strides}, {node.input(0), node.input(1), node.input(2)})};
}

}  // namespace

KILN_ONNX_OP("Resize", parse_resize)
KILN_ONNX_OP("Upsample", parse_upsample)
KILN_ONNX_OP("Col2Im", parse_col2im)

}  // namespace kiln::onnx_frontend
