#include "onnx/parse_nn_common.hpp"

namespace kiln::onnx_frontend {

std::optional<std::vector<std::int64_t>> static_spatial(const shape& s) {
    if (!s.is_tensor()) return std::nullopt;
    std::vector<std::int64_t> d;
    if (!s.dynamic()) {
        for (std::size_t i = 2; i < s.ndim(); ++i) d.push_back(static_cast<std::int64_t>(s.lens()[i]));
        return d;
    }
    const auto& dims = s.dyn_dims();
    for (std::size_t i = 2; i < dims.size(); ++i) {
        if (!dims[i].is_fixed()) return std::nullopt;
        d.push_back(static_cast<std::int64_t>(dims[i].min));
    }
    return d;
}

std::size_t spatial_rank(const onnx_node& node, const shape& x) {
    if (!x.is_tensor() || x.ndim() < 3)
        node.fail(error_code::shape, "input " + x.to_string() + " must have rank 3 or more (N, C, spatial...)");
    return x.ndim() - 2;
}

window_attrs read_window_attrs(const onnx_node& node, const shape& x, std::size_t rank,
                               const std::vector<std::int64_t>& kernel, bool resolve_same) {
    window_attrs w;
    const std::string name = node.op_type();
    w.stride = op::spatial_attr(node.attr_ints("strides", std::vector<std::int64_t>{}), rank, 1, name, "strides");
    w.dilation = op::spatial_attr(node.attr_ints("dilations", std::vector<std::int64_t>{}), rank, 1, name, "dilations");
    std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
    if (auto_pad == "NOTSET" || auto_pad.empty()) {
        w.padding = op::padding_attr(node.attr_ints("pads", std::vector<std::int64_t>{}), rank, name);
    } else if (auto_pad == "VALID") {
        w.padding.assign(2 * rank, 0);
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
        w.padding_mode = auto_pad == "SAME_UPPER" ? op::pad_mode::same_upper : op::pad_mode::same_lower;
        auto in = static_spatial(x);
        if (resolve_same && in && in->size() == rank) {
            w.padding = op::same_padding(w.padding_mode, *in, kernel, w.stride, w.dilation);
            w.padding_mode = op::pad_mode::explicit_pads;
        }
    } else {
        node.fail(error_code::parse, "auto_pad '" + auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
    }
    return w;
}

}  // namespace kiln::onnx_frontend
