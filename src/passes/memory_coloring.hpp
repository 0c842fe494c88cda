// Memory planning: every `allocate` whose buffer does not reach the @return becomes a
// `load` at an offset in one arena (the "#scratch" parameter). Offsets come from
// liveness intervals: buffers live at the same time never overlap. With plan_results the
// returned buffers are planned too (the gpu target: every buffer of an eval then sits at
// a fixed address in its arena, so the eval can be replayed as a CUDA graph; the results
// are copied out of the arena anyway, to the host or to device buffers of their own).
#pragma once
#include <kiln/module.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace kiln {

struct memory_coloring {
    std::size_t alignment = 64;
    bool plan_results = false;
    std::string name() const { return "memory_coloring"; }
    void apply(module& m) const;
};

// One planned buffer: its size and the instruction interval it is live over.
struct buffer_interval {
    std::size_t bytes = 0;
    std::size_t begin = 0;  // index of the allocating instruction
    std::size_t end = 0;    // index of its last use (inclusive)
    std::size_t offset = 0; // assigned offset in the arena
};

// The liveness intervals of a module's planned buffers (before planning).
std::vector<buffer_interval> buffer_intervals(const module& m, bool plan_results = false);
// Assigns offsets (greedy by size, first fit) and returns the arena size.
std::size_t assign_offsets(std::vector<buffer_interval>& buffers, std::size_t alignment);
// The largest total of simultaneously live buffers: no plan can use less.
std::size_t liveness_lower_bound(const std::vector<buffer_interval>& buffers);

}  // namespace kiln
