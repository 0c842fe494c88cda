#include "passes/common_subexpression_elimination.hpp"

#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>

#include <unordered_map>
#include <vector>

namespace kiln {

namespace {
bool mergeable(const instruction& ins) {
    if (ins.is_param() || ins.is_literal() || ins.is_return()) return false;
    auto t = ins.get_operator().traits();
    if (t.nondeterministic || t.side_effects) return false;
    // Buffers are distinct by design: merging two allocations would alias two results.
    return !rewrite::is<builtin::allocate>(ins) && !rewrite::is<builtin::load>(ins);
}

std::size_t key_of(const instruction& ins) {
    std::size_t h = ins.get_operator().hash();
    for (auto in : ins.inputs()) h = h * 1000003u ^ std::hash<const void*>{}(&*in);
    for (auto m : ins.module_inputs()) h = h * 1000003u ^ std::hash<const void*>{}(m);
    return h;
}

bool same(const instruction& a, const instruction& b) {
    if (a.inputs().size() != b.inputs().size() || a.module_inputs() != b.module_inputs()) return false;
    for (std::size_t i = 0; i < a.inputs().size(); ++i)
        if (&*a.inputs()[i] != &*b.inputs()[i]) return false;
    return a.get_operator() == b.get_operator();
}
}  // namespace

void common_subexpression_elimination::apply(module& m) const {
    // One forward sweep: a merge rewires users, which are visited later and may merge in turn.
    std::unordered_map<std::size_t, std::vector<instruction_ref>> seen;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!mergeable(*ins)) continue;
        auto& bucket = seen[key_of(*ins)];
        bool merged = false;
        for (auto prev : bucket)
            if (same(*prev, *ins)) {
                m.replace_instruction(ins, prev);
                merged = true;
                break;
            }
        if (!merged) bucket.push_back(ins);
    }
}

}  // namespace kiln
