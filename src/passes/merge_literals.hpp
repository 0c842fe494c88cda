// Merges literals with the same shape and bytes into one (the first), so that each
// constant is stored, and read through the caches, once.
//
// Why: passes that copy instructions (split_batch's copy per image) share their weight
// literals, but each copy's lowering then stores its own reordered weights (oneDNN's
// blocked layouts, packed GEMM panels): identical bytes, N times over. Run after the
// lowerings; the merged-away literals lose their readers and dead-code elimination drops
// them.
#pragma once
#include <kiln/module.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

// Literals by content, for merging them as they are made (a lowering that would
// otherwise hold every duplicate until the pass runs: its peak memory).
class literal_index {
public:
    // An indexed literal with l's shape and bytes, if any.
    std::optional<instruction_ref> find(const literal& l) const;
    void add(instruction_ref lit);

private:
    std::unordered_map<std::size_t, std::vector<instruction_ref>> buckets_;
};

struct merge_literals {
    std::string name() const { return "merge_literals"; }
    void apply(module& m) const;
};

}  // namespace kiln
