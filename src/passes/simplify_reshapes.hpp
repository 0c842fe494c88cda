// Cancels and merges shape-only ops (all views of their input when it is row-major):
//   * a chain of reshape / flatten / squeeze / unsqueeze becomes one reshape of the
//     chain's input (its final dims), and vanishes when it returns to the input's shape;
//   * transpose(transpose(x, p1), p2) becomes transpose(x, p1[p2[i]]), or x when the
//     composed permutation is the identity;
//   * a transpose that only moves dimensions of length 1 is a reshape;
//   * a gather at one constant index is a slice (and a squeeze for a scalar index): a view
//     (also for dynamic shapes, when the gathered axis has one length).
// The others only for static shapes. Bypassed instructions are left for dead-code elimination.
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln {

struct simplify_reshapes {
    std::string name() const { return "simplify_reshapes"; }
    void apply(module& m) const;
};

}  // namespace kiln
