// A Loop whose body appends to a carried value with Concat along axis 0 (torchvision's
// Mask R-CNN and Keypoint R-CNN paste one mask or keypoint set per detection this way,
// exporters' decode loops append a token per step) copies the whole value every
// iteration: quadratic in the iterations (Mask R-CNN: 100 masks of 320x320, 163 ms of
// copying). This pass makes the body return only the appended rows and marks the carried
// value `appended` (op::loop), so the loop concatenates once at the end.
//
// Applies when the body's result for carried value j is concat{axis 0}(its own input j,
// rows), that Concat is read by nothing else, and input j is read by nothing but that
// Concat (so the body never sees the value grow).
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln {

struct loop_append {
    std::string name() const { return "loop_append"; }
    void apply(module& m) const;
};

}  // namespace kiln
