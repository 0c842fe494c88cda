// Merges instructions that compute the same op on the same inputs.
#pragma once
#include <kiln/module.hpp>

namespace kiln {

struct common_subexpression_elimination {
    std::string name() const { return "common_subexpression_elimination"; }
    void apply(module& m) const;
};

}  // namespace kiln
