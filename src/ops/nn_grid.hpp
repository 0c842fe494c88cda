// Sampling on grids: grid_sample (ONNX GridSample) and affine_grid (ONNX AffineGrid).
#pragma once
#include "ops/nn_common.hpp"

#include <kiln/operation.hpp>

namespace kiln::op {

enum class grid_mode : std::uint8_t { linear = 0, nearest = 1, cubic = 2 };
enum class grid_padding : std::uint8_t { zeros = 0, border = 1, reflection = 2 };

// Inputs (x (N, C, D1..Dr), grid (N, O1..Or, r)); output (N, C, O1..Or). Grid
// coordinates are normalized to [-1, 1] and listed innermost dim first (x, y, z).
// Linear and nearest apply the padding mode to the sampling position; cubic applies it
// to each of its 4 taps per dim (coefficient -0.75).
struct grid_sample {
    grid_mode mode = grid_mode::linear;
    grid_padding padding_mode = grid_padding::zeros;
    bool align_corners = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.mode, "mode");
        f(self.padding_mode, "padding_mode");
        f(self.align_corners, "align_corners");
    }
    std::string name() const { return "grid_sample"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (theta (N, r, r+1)[, size]); output (N, D1..Dr, r): theta applied to the
// normalized coordinates (x, y[, z], 1) of every position of an output of `size`
// (N, C, D1..Dr). `size` is the attribute when known at parse time, else input 1.
struct affine_grid {
    bool align_corners = false;
    std::vector<std::int64_t> size;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.align_corners, "align_corners");
        f(self.size, "size");
    }
    std::string name() const { return "affine_grid"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
