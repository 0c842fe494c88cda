// The boxes NonMaxSuppression has kept so far, bucketed on a uniform grid so that a
// candidate is tested only against kept boxes near it. Detectors run one NMS over every
// class at once with each class's boxes shifted apart (torchvision's batched_nms), so
// thousands of kept boxes lie far from any one candidate; testing all of them made NMS
// quadratic in the kept count (SSDlite: 226 ms of a 270 ms run).
//
// A cell is as large as the largest box, and a kept box sits in the cell of its lower
// corner: a box overlapping the candidate then has its lower corner less than one cell
// below and left of the candidate's, so only those cells are searched. Which kept boxes
// suppress a candidate does not depend on the grid: the result is the same as testing
// all of them.
#pragma once

#include <cstddef>
#include <vector>

namespace kiln::op {

// Corners (y0 <= y1, x0 <= x1) and area of one box.
struct nms_box {
    double y0, x0, y1, x1, area;
};

// Whether `kept` suppresses `cand`: their intersection over union exceeds `iou_threshold`.
inline bool nms_suppresses(const nms_box& kept, const nms_box& cand, double iou_threshold) {
    const double ih = (kept.y1 < cand.y1 ? kept.y1 : cand.y1) - (kept.y0 > cand.y0 ? kept.y0 : cand.y0);
    const double iw = (kept.x1 < cand.x1 ? kept.x1 : cand.x1) - (kept.x0 > cand.x0 ? kept.x0 : cand.x0);
    if (!(ih > 0.0) || !(iw > 0.0)) return false;
    const double inter = ih * iw;
    const double uni = kept.area + cand.area - inter;
    return uni > 0.0 && inter / uni > iou_threshold;
}

class nms_box_grid {
public:
    // A grid covering `boxes` (every box a candidate may be); one cell when a coordinate
    // is not finite or the boxes are too spread out for a grid of bounded size.
    explicit nms_box_grid(const std::vector<nms_box>& boxes);
    // Whether a kept box suppresses `cand`.
    bool suppressed(const nms_box& cand, double iou_threshold) const;
    void add(const nms_box& b);
    // Forget every kept box (the next class).
    void clear();

private:
    std::size_t column(double x) const;
    std::size_t row(double y) const;
    double origin_y_ = 0.0, origin_x_ = 0.0, cell_ = 1.0;
    std::size_t rows_ = 1, columns_ = 1;
    std::vector<std::vector<nms_box>> cells_;
    std::vector<std::size_t> used_;  // cells holding a kept box, to clear
};

}  // namespace kiln::op
