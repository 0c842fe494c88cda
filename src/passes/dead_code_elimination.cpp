#include "passes/dead_code_elimination.hpp"

#include <iterator>

namespace kiln {

void dead_code_elimination::apply(module& m) const {
    // Walk backwards so a chain of dead instructions goes in one sweep.
    auto ret = m.get_return();
    auto it = m.end();
    while (it != m.begin()) {
        --it;
        if (it == ret || it->is_param() || !it->outputs().empty()) continue;
        if (it->get_operator().traits().side_effects) continue;
        if (ret == m.end() && std::next(it) == m.end()) continue;  // no @return: the last value is the result
        it = m.remove_instruction(it);
    }
}

}  // namespace kiln
