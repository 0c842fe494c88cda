// Einsum, Det, GridSample, AffineGrid, RoiAlign and NonMaxSuppression.
#include "onnx/einsum_product.hpp"
#include "onnx/onnx_node.hpp"
#include "ops/nn_detection.hpp"
#include "ops/nn_einsum.hpp"
#include "ops/nn_grid.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/tensor_views.hpp"

#include <algorithm>
#include <numeric>
#include <optional>

namespace kiln::onnx_frontend {

namespace {

// A dim two operands share is the same size in both: fixed and equal, or the same named
// size. Einsum broadcasts a 1 against n where matmul would not, so anything else stays einsum.
bool same_size(const dynamic_dimension& x, const dynamic_dimension& y) {
    return x == y && (x.is_fixed() || !x.symbol.empty());
}

// Dims `perm` picks from s, in that order.
std::vector<dynamic_dimension> permuted_dims(const shape& s, const std::vector<std::int64_t>& perm) {
    const auto dims = s.to_dynamic_dims();
    std::vector<dynamic_dimension> d;
    for (auto i : perm) d.push_back(dims[static_cast<std::size_t>(i)]);
    return d;
}

// The product of fixed dims [first, last).
std::int64_t dims_size(auto first, auto last) {
    std::int64_t n = 1;
    for (; first != last; ++first) n *= static_cast<std::int64_t>(first->min);
    return n;
}

// An Einsum that is a batched product (einsum_product.hpp) as transpose + matmul, so the
// targets run it on their GEMMs rather than einsum's reference kernel; nullopt where it
// must stay einsum.
std::optional<instruction_ref> add_einsum_product(onnx_node& node, const einsum_product& p, instruction_ref a,
                                                  instruction_ref b) {
    const auto& sa = a->get_shape();
    const auto& sb = b->get_shape();
    // Integer einsum accumulates unlike integer matmul; ranks that do not fit the terms
    // get einsum's own error.
    if (!sa.is_tensor() || !sb.is_tensor() || sa.get_type() != sb.get_type() ||
        !op::is_float_compute_type(sa.get_type()) || sa.ndim() != p.perm_a.size() || sb.ndim() != p.perm_b.size())
        return std::nullopt;
    const auto da = permuted_dims(sa, p.perm_a);  // [batch..., m..., k...]
    const auto db = permuted_dims(sb, p.perm_b);  // [batch..., k..., n...]
    const auto batch = static_cast<std::ptrdiff_t>(p.batch);
    const auto m_end = da.begin() + batch + static_cast<std::ptrdiff_t>(p.m);
    const auto k_end = db.begin() + batch + static_cast<std::ptrdiff_t>(p.k);
    if (!std::equal(da.begin(), da.begin() + batch, db.begin(), same_size) ||
        !std::equal(m_end, da.end(), db.begin() + batch, same_size))
        return std::nullopt;
    // Grouping labels into one matmul dim takes a reshape to their product, so their sizes
    // must be known (and not 0, which reshape reads as "copy"); batch dims may stay
    // dynamic: reshape's 0 copies them.
    auto known = [](const dynamic_dimension& d) { return d.is_fixed() && d.min > 0; };
    if (p.needs_grouping() &&
        !(std::all_of(da.begin() + batch, da.end(), known) && std::all_of(db.begin() + batch, db.end(), known)))
        return std::nullopt;
    auto transpose = [&](instruction_ref x, const std::vector<std::int64_t>& perm) {
        std::vector<std::int64_t> identity(perm.size());
        std::iota(identity.begin(), identity.end(), 0);
        return perm == identity ? x : node.add(op::transpose{perm}, {x});
    };
    auto reshape = [&](instruction_ref x, std::vector<std::int64_t> tail) {
        tail.insert(tail.begin(), p.batch, 0);
        return node.add(op::reshape{tail}, {x});
    };
    a = transpose(a, p.perm_a);
    b = transpose(b, p.perm_b);
    if (p.needs_grouping()) {
        a = reshape(a, {dims_size(da.begin() + batch, m_end), dims_size(m_end, da.end())});
        b = reshape(b, {dims_size(db.begin() + batch, k_end), dims_size(k_end, db.end())});
    }
    auto y = node.add(op::matmul{}, {a, b});
    if (p.needs_grouping()) {
        std::vector<std::int64_t> free;  // [m..., n...]
        for (auto it = da.begin() + batch; it != m_end; ++it) free.push_back(static_cast<std::int64_t>(it->min));
        for (auto it = k_end; it != db.end(); ++it) free.push_back(static_cast<std::int64_t>(it->min));
        y = reshape(y, free);
    }
    return transpose(y, p.perm_out);
}

std::vector<instruction_ref> parse_einsum(onnx_node& node) {
    op::einsum op;
    op.equation = node.attr_string("equation");
    const auto inputs = node.present_inputs();
    if (inputs.size() == 2)
        if (auto p = einsum_as_product(op.equation))
            if (auto y = add_einsum_product(node, *p, inputs[0], inputs[1])) return {*y};
    return {node.add(op, inputs)};
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
