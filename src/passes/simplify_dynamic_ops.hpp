// After a dynamic program is specialized to concrete input shapes, rewrites the
// run-time forms of value-dependent ops into their static forms wherever the values
// they read are now known (reshape_dynamic(x, literal) -> reshape{dims}(x)); turns
// shape_of/size_of of static tensors into literals; and folds value-dependent ops
// (range, nonzero, unique, ...) whose inputs are all known into literals.
#pragma once
#include <kiln/module.hpp>

#include <cstddef>
#include <string>

namespace kiln {

struct simplify_dynamic_ops {
    // Values reached through ops (Shape -> Gather -> Concat chains) are computed only
    // when every tensor involved has at most this many elements.
    std::size_t max_eval_elements = 4096;
    std::string name() const { return "simplify_dynamic_ops"; }
    void apply(module& m) const;
};

}  // namespace kiln
