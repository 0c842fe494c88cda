// ONNX cutting and joining operators: Slice, Concat, Split, Pad, Tile, CenterCropPad.
#include "onnx/parse_tensor_common.hpp"
#include "ops/tensor_layout.hpp"
#include "ops/tensor_slice.hpp"

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> parse_slice(onnx_node& node) {
    if (node.opset() < 10) {
        op::slice s{node.attr_ints("axes", std::vector<std::int64_t>{}), node.attr_ints("starts"), node.attr_ints("ends"), {}};
        return {node.add(s, {node.input(0)})};
    }
    auto starts = constant_ints(node, 1);
    auto ends = constant_ints(node, 2);
    auto axes = node.has_input(3) ? constant_ints(node, 3) : std::optional<std::vector<std::int64_t>>(std::vector<std::int64_t>{});
    auto steps = node.has_input(4) ? constant_ints(node, 4) : std::optional<std::vector<std::int64_t>>(std::vector<std::int64_t>{});
    if (starts && ends && axes && steps) return {node.add(op::slice{*axes, *starts, *ends, *steps}, {node.input(0)})};
    std::vector<instruction_ref> args{node.input(0), node.input(1), node.input(2)};
    if (node.has_input(3) || node.has_input(4)) {
        if (node.has_input(3)) {
            args.push_back(node.input(3));
        } else {
            // Steps without axes: the default axes 0..n-1, needing n known.
            auto n = op::static_length(node.input(1)->get_shape(), "Slice", "starts");
            std::vector<std::int64_t> all(n);
            for (std::size_t i = 0; i < n; ++i) all[i] = static_cast<std::int64_t>(i);
            args.push_back(node.add_literal(literal(shape(type::int64, {n}), all)));
        }
        if (node.has_input(4)) args.push_back(node.input(4));
    }
    return {node.add(op::slice_dynamic{}, args)};
}

std::vector<instruction_ref> parse_concat(onnx_node& node) {
    auto axis = node.attr_int("axis", node.opset() < 4 ? std::optional<std::int64_t>(1) : std::nullopt);
    auto inputs = node.present_inputs();
    // Zero-length inputs add nothing (exporters emit them for empty lists).
    return {node.add(op::concat{axis}, inputs)};
}

std::vector<instruction_ref> parse_split(onnx_node& node) {
    auto axis = node.attr_int("axis", 0);
    std::size_t count = node.num_outputs();
    std::optional<std::vector<std::int64_t>> sizes;
    bool split_input = node.opset() >= 13 || (node.opset() < 2 && node.has_input(1));
    if (split_input && node.has_input(1)) {
        sizes = constant_ints(node, 1);
        if (!sizes) {
            auto ins = node.add(op::split_dynamic{axis, count}, {node.input(0), node.input(1)});
            return node.unpack(ins, count);
        }
    } else if (!split_input && node.has_attr("split")) {
        sizes = node.attr_ints("split");
    }
    if (node.opset() >= 18 && node.has_attr("num_outputs")) count = static_cast<std::size_t>(node.attr_int("num_outputs"));
    if (!sizes) {
        const auto& s = node.input(0)->get_shape();
        auto a = op::normalize_axis(axis, s.ndim(), "Split");
        auto d = s.to_dynamic_dims()[a];
        if (!d.is_fixed()) return node.unpack(node.add(op::split_dynamic{axis, count}, {node.input(0)}), count);
        if (node.opset() < 18 && d.min % count != 0)
            node.fail(error_code::shape, "cannot split a dimension of " + std::to_string(d.min) + " into " +
                                             std::to_string(count) + " equal parts");
        sizes = op::even_split(d.min, count);
    }
    return node.unpack(node.add(op::split{axis, *sizes}, {node.input(0)}), sizes->size());
}

std::vector<instruction_ref> parse_pad(onnx_node& node) {
    auto mode = node.attr_string("mode", "constant");
    auto x = node.input(0);
    auto value_literal = [&](float v) {
        return node.add_literal(literal(shape(x->get_shape().get_type()), std::vector<float>{v}));
    };
    if (node.opset() < 11) {
        auto pads = node.attr_ints(node.opset() < 2 ? "paddings" : "pads");
        float v = node.attr_float("value", 0.0f);
        std::vector<instruction_ref> args{x};
        if (v != 0.0f) args.push_back(value_literal(v));
        return {node.add(op::pad{mode, pads, {}}, args)};
    }
    bool has_value = node.has_input(2) && !is_empty_input(node, 2);
    auto pads = constant_ints(node, 1);
    std::optional<std::vector<std::int64_t>> axes = std::vector<std::int64_t>{};
    if (node.has_input(3)) axes = constant_ints(node, 3);
    if (pads && axes) {
        std::vector<instruction_ref> args{x};
        if (has_value) args.push_back(node.input(2));
        return {node.add(op::pad{mode, *pads, *axes}, args)};
    }
    std::vector<instruction_ref> args{x, node.input(1)};
    if (has_value) args.push_back(node.input(2));
    if (node.has_input(3)) args.push_back(node.input(3));
    return {node.add(op::pad_dynamic{mode, has_value, node.has_input(3)}, args)};
}

std::vector<instruction_ref> parse_tile(onnx_node& node) {
    if (node.opset() < 6) {
        // Tile-1: tiles (how many copies) along one axis, both as inputs.
        auto tiles = constant_ints(node, 1);
        auto axis = constant_ints(node, 2);
        if (!tiles || !axis || tiles->size() != 1 || axis->size() != 1)
            node.fail(error_code::unsupported, "Tile-1 needs constant scalar tiles and axis inputs");
        auto rank = node.input(0)->get_shape().ndim();
        std::vector<std::int64_t> repeats(rank, 1);
        repeats.at(op::normalize_axis((*axis)[0], rank, "Tile")) = (*tiles)[0];
        return {node.add(op::tile{repeats}, {node.input(0)})};
    }
    if (auto repeats = constant_ints(node, 1)) return {node.add(op::tile{*repeats}, {node.input(0)})};
    return {node.add(op::tile_dynamic{}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_center_crop_pad(onnx_node& node) {
    auto axes = node.attr_ints("axes", std::vector<std::int64_t>{});
    auto x = node.input(0);
    auto target = constant_ints(node, 1);
    if (!target || x->get_shape().dynamic()) return {node.add(op::center_crop_pad{axes}, {x, node.input(1)})};
    auto p = op::plan_center_crop_pad(x->get_shape().lens(), *target, axes, "CenterCropPad");
    if (!p.axes.empty()) x = node.add(op::slice{p.axes, p.starts, p.ends, {}}, {x});
    if (std::any_of(p.pads.begin(), p.pads.end(), [](auto v) { return v != 0; }))
        x = node.add(op::pad{"constant", p.pads, {}}, {x});
    return {x};
}

}  // namespace

KILN_ONNX_OP("Slice", parse_slice)
KILN_ONNX_OP("Concat", parse_concat)
KILN_ONNX_OP("Split", parse_split)
KILN_ONNX_OP("Pad", parse_pad)
KILN_ONNX_OP("Tile", parse_tile)
KILN_ONNX_OP("CenterCropPad", parse_center_crop_pad)

}  // namespace kiln::onnx_frontend
