#include "ops/nms_box_grid.hpp"

#include <algorithm>
#include <cmath>

namespace kiln::op {

nms_box_grid::nms_box_grid(const std::vector<nms_box>& boxes) {
    double y_lo = 0.0, x_lo = 0.0, y_hi = 0.0, x_hi = 0.0, largest = 0.0;
    bool finite = true;
    for (std::size_t i = 0; i < boxes.size(); ++i) {
        const auto& b = boxes[i];
        if (!std::isfinite(b.y0) || !std::isfinite(b.x0) || !std::isfinite(b.y1) || !std::isfinite(b.x1)) {
            finite = false;
            break;
        }
        y_lo = i == 0 ? b.y0 : std::min(y_lo, b.y0);
        x_lo = i == 0 ? b.x0 : std::min(x_lo, b.x0);
        y_hi = i == 0 ? b.y1 : std::max(y_hi, b.y1);
        x_hi = i == 0 ? b.x1 : std::max(x_hi, b.x1);
        largest = std::max({largest, b.y1 - b.y0, b.x1 - b.x0});
    }
    // At most a few cells per box: an empty cell costs a look-up, and the cells are cleared
    // per class.
    const double most_cells = static_cast<double>(std::max<std::size_t>(64, 4 * boxes.size()));
    if (finite && !boxes.empty() && largest > 0.0) {
        double cell = largest;
        for (;;) {
            const double rows = std::floor((y_hi - y_lo) / cell) + 1.0, columns = std::floor((x_hi - x_lo) / cell) + 1.0;
            if (rows * columns <= most_cells) {
                rows_ = static_cast<std::size_t>(rows);
                columns_ = static_cast<std::size_t>(columns);
                break;
            }
            cell *= std::sqrt(rows * columns / most_cells) * 1.01;
        }
        origin_y_ = y_lo;
        origin_x_ = x_lo;
        cell_ = cell;
    }
    cells_.resize(rows_ * columns_);
}

std::size_t nms_box_grid::column(double x) const {
    const double c = std::floor((x - origin_x_) / cell_);
    return c <= 0.0 || columns_ == 1 ? 0 : std::min(columns_ - 1, static_cast<std::size_t>(c));
}

std::size_t nms_box_grid::row(double y) const {
    const double r = std::floor((y - origin_y_) / cell_);
    return r <= 0.0 || rows_ == 1 ? 0 : std::min(rows_ - 1, static_cast<std::size_t>(r));
}

bool nms_box_grid::suppressed(const nms_box& cand, double iou_threshold) const {
    // Lower corners of overlapping boxes lie in (cand - cell, cand's upper corner); one cell
    // more on each side absorbs rounding in the cell arithmetic.
    const std::size_t r_hi = row(cand.y1), c_hi = column(cand.x1);
    const std::size_t r_lo = row(cand.y0 - 2.0 * cell_), c_lo = column(cand.x0 - 2.0 * cell_);
    for (std::size_t r = r_lo; r <= r_hi; ++r)
        for (std::size_t c = c_lo; c <= c_hi; ++c)
            for (const auto& kept : cells_[r * columns_ + c])
                if (nms_suppresses(kept, cand, iou_threshold)) return true;
    return false;
}

void nms_box_grid::add(const nms_box& b) {
    const std::size_t at = row(b.y0) * columns_ + column(b.x0);
    if (cells_[at].empty()) used_.push_back(at);
    cells_[at].push_back(b);
}

void nms_box_grid::clear() {
    for (auto at : used_) cells_[at].clear();
    used_.clear();
}

}  // namespace kiln::op
