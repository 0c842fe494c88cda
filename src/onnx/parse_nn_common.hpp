// Attribute reading shared by the nn family's parse functions (convolution and
// pooling agree on auto_pad, pads, strides and dilations).
#pragma once
#include "onnx/onnx_node.hpp"
#include "ops/nn_common.hpp"

#include <optional>

namespace kiln::onnx_frontend {

// The spatial dims (2..) of an instruction's shape when all of them are static.
std::optional<std::vector<std::int64_t>> static_spatial(const shape& s);

struct window_attrs {
    std::vector<std::int64_t> padding;  // {begin..., end...}
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> dilation;
    op::pad_mode padding_mode = op::pad_mode::explicit_pads;
};

// Reads auto_pad, pads, strides and dilations for `rank` spatial dims with kernel
// `kernel`. auto_pad SAME_* is resolved into pads when the input's spatial dims are
// static, and kept as padding_mode otherwise; VALID means no padding.
window_attrs read_window_attrs(const onnx_node& node, const shape& x, std::size_t rank,
                               const std::vector<std::int64_t>& kernel, bool resolve_same = true);

// The input rank, checked to have at least one spatial dim.
std::size_t spatial_rank(const onnx_node& node, const shape& x);

}  // namespace kiln::onnx_frontend
