// Folds instructions whose inputs are all literals into literals, using each op's
// reference compute. Results much larger than their inputs (broadcasts, ConstantOfShape)
// stay computed at run time rather than bloating the program. Control flow with a
// literal condition folds too: an If becomes its taken branch (the other is dropped, never
// lowered), a Loop that runs zero times its initial values and empty scan outputs.
#pragma once
#include <kiln/module.hpp>

namespace kiln {

struct propagate_constants {
    std::string name() const { return "propagate_constants"; }
    void apply(module& m) const;
};

}  // namespace kiln
