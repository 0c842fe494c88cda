// Detection heads: roi_align (ONNX RoiAlign) and nonmax_suppression (ONNX
// NonMaxSuppression).
#pragma once
#include "ops/nn_common.hpp"

#include <kiln/operation.hpp>

namespace kiln::op {

// Inputs (x (N, C, H, W), rois (R, 4) as x1, y1, x2, y2, batch_indices (R)); output
// (R, C, output_height, output_width). Each bin averages (or takes the max of) a
// sampling_ratio^2 grid of bilinear samples (adaptive ceil(roi / bins) when 0).
// half_pixel shifts the scaled roi by -0.5; the older output_half_pixel instead makes
// rois at least 1 x 1.
struct roi_align {
    bool max_mode = false;
    std::int64_t output_height = 1;
    std::int64_t output_width = 1;
    std::int64_t sampling_ratio = 0;
    float spatial_scale = 1.0f;
    bool half_pixel = true;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.max_mode, "max_mode");
        f(self.output_height, "output_height");
        f(self.output_width, "output_width");
        f(self.sampling_ratio, "sampling_ratio");
        f(self.spatial_scale, "spatial_scale");
        f(self.half_pixel, "half_pixel");
    }
    std::string name() const { return "roi_align"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (boxes (B, N, 4), scores (B, C, N)[, max_output_boxes_per_class][, iou_threshold]
// [, score_threshold]); the flags say which optional inputs are present. Output
// (selected, 3) int64 rows (batch, class, box), per batch and class in descending
// score order. A box is dropped when its IoU with a kept box exceeds iou_threshold or
// its score does not exceed score_threshold.
struct nonmax_suppression {
    bool center_point_box = false;
    bool has_max_output = false;
    bool has_iou_threshold = false;
    bool has_score_threshold = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.center_point_box, "center_point_box");
        f(self.has_max_output, "has_max_output");
        f(self.has_iou_threshold, "has_iou_threshold");
        f(self.has_score_threshold, "has_score_threshold");
    }
    std::string name() const { return "nonmax_suppression"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
