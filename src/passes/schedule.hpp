// Orders a lowered module's instructions to lower the arena that memory_coloring plans.
// Runs after lowering (buffers are explicit `allocate`s) and before memory_coloring.
//
// A greedy list scheduler: among the instructions whose inputs are all computed, take
// the one that adds the fewest live bytes (bytes of the buffers it allocates minus the
// bytes of the buffers it is the last reader of), ties going to the original order
// (one variant) or to the users of what was just computed (a depth-first variant). Each
// `allocate` moves to just before its first user, as lowering places it. The candidate
// orders are planned with the real planner (buffer_intervals + assign_offsets) and the
// module keeps the smallest arena; the original order wins ties, so the pass never makes
// a plan worse.
//
// Kept in place: parameters and literals (first), the @return (last), and the relative
// order of ops with side effects or random results. An op whose result aliases a
// computed input (an in-place kernel) stays after the other readers of that input.
#pragma once
#include <kiln/module.hpp>

#include <cstddef>
#include <string>

namespace kiln {

struct schedule {
    std::size_t alignment = 64;  // as memory_coloring's
    std::string name() const { return "schedule"; }
    void apply(module& m) const;
};

}  // namespace kiln
