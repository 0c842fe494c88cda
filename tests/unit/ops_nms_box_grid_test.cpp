// nms_box_grid: the kept boxes a candidate is tested against are only those near it, and
// the answer must be the one testing every kept box gives.
#include "ops/nms_box_grid.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace kiln::op {
namespace {

nms_box make_box(double y0, double x0, double h, double w) { return {y0, x0, y0 + h, x0 + w, h * w}; }

// Greedy NMS over `boxes` in order, once through the grid and once testing every kept box;
// returns whether both keep the same boxes, and how many they keep.
std::pair<bool, std::size_t> same_as_testing_all(const std::vector<nms_box>& boxes, double iou_threshold) {
    nms_box_grid grid(boxes);
    std::vector<nms_box> all;
    for (const auto& b : boxes) {
        bool by_all = false;
        for (const auto& k : all) by_all = by_all || nms_suppresses(k, b, iou_threshold);
        if (grid.suppressed(b, iou_threshold) != by_all) return {false, all.size()};
        if (!by_all) {
            grid.add(b);
            all.push_back(b);
        }
    }
    return {true, all.size()};
}

TEST(ops_nms_box_grid, keeps_what_testing_every_kept_box_keeps) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> pos(0.0, 300.0), size(0.5, 60.0), unit(0.0, 1.0);
    // Boxes of 20 classes shifted apart as torchvision's batched_nms does (the case the grid
    // is for), one class (boxes overlap everywhere), and a few boxes far larger than the rest.
    for (int layout = 0; layout < 3; ++layout) {
        std::vector<nms_box> boxes;
        for (int i = 0; i < 3000; ++i) {
            const double offset = layout == 0 ? 301.0 * static_cast<double>(i % 20) : 0.0;
            boxes.push_back(make_box(pos(rng) + offset, pos(rng) + offset, size(rng), size(rng)));
        }
        if (layout == 2)
            for (int i = 0; i < 5; ++i) boxes[i * 100] = make_box(-1000.0 * unit(rng), -500.0, 2000.0, 1500.0);
        for (double thr : {0.0, 0.3, 0.7}) {
            auto [same, kept] = same_as_testing_all(boxes, thr);
            EXPECT_TRUE(same) << "layout " << layout << ", IoU threshold " << thr;
            EXPECT_GT(kept, 0u);
        }
    }
}

TEST(ops_nms_box_grid, takes_degenerate_and_non_finite_boxes) {
    // Points and lines (no area) never suppress; a NaN or infinite corner makes the grid one
    // cell, which is testing every kept box.
    std::vector<nms_box> boxes{make_box(1, 1, 0, 0), make_box(1, 1, 0, 0), make_box(0, 0, 2, 0), make_box(0, 0, 2, 2),
                               make_box(0.5, 0.5, 2, 2)};
    EXPECT_EQ(same_as_testing_all(boxes, 0.1), (std::pair<bool, std::size_t>{true, 4}));
    boxes.push_back(make_box(std::numeric_limits<double>::quiet_NaN(), 0, 1, 1));
    boxes.push_back({0, 0, std::numeric_limits<double>::infinity(), 1, std::numeric_limits<double>::infinity()});
    EXPECT_TRUE(same_as_testing_all(boxes, 0.1).first);
    EXPECT_TRUE(same_as_testing_all({}, 0.5).first);
}

}  // namespace
}  // namespace kiln::op
