// Removes instructions whose results nobody uses (keeping parameters, the @return
// and ops with side effects).
#pragma once
#include <kiln/module.hpp>

namespace kiln {

struct dead_code_elimination {
    std::string name() const { return "dead_code_elimination"; }
    void apply(module& m) const;
};

}  // namespace kiln
