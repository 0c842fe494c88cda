// Folds instructions whose inputs are all literals into literals, using each op's
// reference compute. Results much larger than their inputs (broadcasts, ConstantOfShape)
// stay computed at run time rather than bloating the program.
#pragma once
#include <kiln/module.hpp>

namespace kiln {

struct propagate_constants {
    std::string name() const { return "propagate_constants"; }
    void apply(module& m) const;
};

}  // namespace kiln
