#include "passes/memory_coloring.hpp"

#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace kiln {

namespace {

struct analysis {
    std::vector<const instruction*> allocations;
    std::vector<buffer_interval> intervals;
};

analysis analyze(const module& m, bool plan_results) {
    analysis a;
    std::unordered_map<const instruction*, std::size_t> index;
    std::unordered_map<const instruction*, const instruction*> root;  // instruction -> allocate it writes/aliases
    std::map<const instruction*, std::size_t> slot;                   // allocate -> interval
    std::vector<bool> returned;
    std::size_t i = 0;
    for (auto& ins : m) {
        index.emplace(&ins, i);
        if (rewrite::is<builtin::allocate>(ins)) {
            root.emplace(&ins, &ins);
            slot.emplace(&ins, a.intervals.size());
            a.allocations.push_back(&ins);
            a.intervals.push_back({ins.get_shape().bytes(), i, i, 0});
            returned.push_back(false);
        } else if (!ins.is_param() && !ins.is_literal() && !ins.is_return()) {
            auto alias = ins.get_operator().output_alias(to_shapes(ins.inputs()));
            if (alias >= 0 && static_cast<std::size_t>(alias) < ins.inputs().size()) {
                auto it = root.find(&*ins.inputs()[alias]);
                if (it != root.end()) root.emplace(&ins, it->second);
            }
        }
        // Any use of a buffer (through any alias) extends its life to here.
        for (auto in : ins.inputs()) {
            auto it = root.find(&*in);
            if (it == root.end()) continue;
            auto s = slot.at(it->second);
            a.intervals[s].end = std::max(a.intervals[s].end, i);
            if (ins.is_return()) returned[s] = true;
        }
        ++i;
    }
    // Buffers handed back to the caller are allocated per run, not planned (unless asked).
    analysis planned;
    for (std::size_t k = 0; k < a.intervals.size(); ++k) {
        if (returned[k] && !plan_results) continue;
        planned.allocations.push_back(a.allocations[k]);
        planned.intervals.push_back(a.intervals[k]);
    }
    return planned;
}

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

}  // namespace

std::vector<buffer_interval> buffer_intervals(const module& m, bool plan_results) {
    return analyze(m, plan_results).intervals;
}

std::size_t assign_offsets(std::vector<buffer_interval>& buffers, std::size_t alignment) {
    std::vector<std::size_t> order(buffers.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    // Largest first, then earliest: big buffers get the low offsets and small ones
    // fill the gaps between them.
    std::stable_sort(order.begin(), order.end(), [&](auto x, auto y) {
        if (buffers[x].bytes != buffers[y].bytes) return buffers[x].bytes > buffers[y].bytes;
        return buffers[x].begin < buffers[y].begin;
    });
    std::vector<std::size_t> placed;
    std::size_t total = 0;
    for (auto k : order) {
        auto& b = buffers[k];
        // Occupied ranges of placed buffers whose lifetimes overlap b's.
        std::vector<std::pair<std::size_t, std::size_t>> busy;
        for (auto p : placed) {
            auto& o = buffers[p];
            if (o.begin <= b.end && b.begin <= o.end) busy.emplace_back(o.offset, o.offset + align_up(o.bytes, alignment));
        }
        std::sort(busy.begin(), busy.end());
        std::size_t offset = 0;
        for (auto& [lo, hi] : busy) {
            if (offset + b.bytes <= lo) break;
            offset = std::max(offset, hi);
        }
        b.offset = offset;
        total = std::max(total, align_up(offset + b.bytes, alignment));
        placed.push_back(k);
    }
    return total;
}

std::size_t liveness_lower_bound(const std::vector<buffer_interval>& buffers) {
    std::map<std::size_t, long long> events;
    for (auto& b : buffers) {
        events[b.begin] += static_cast<long long>(b.bytes);
        events[b.end + 1] -= static_cast<long long>(b.bytes);
    }
    long long live = 0, best = 0;
    for (auto& [t, d] : events) {
        live += d;
        best = std::max(best, live);
    }
    return static_cast<std::size_t>(best);
}

void memory_coloring::apply(module& m) const {
    if (m.get_parameter(builtin::scratch_parameter) != m.end()) return;  // already planned
    auto a = analyze(m, plan_results);
    if (a.intervals.empty()) return;
    auto total = assign_offsets(a.intervals, alignment);
    auto scratch = m.insert_parameter(m.begin(), builtin::scratch_parameter, shape(type::uint8, std::vector<std::size_t>{std::max<std::size_t>(total, 1)}));
    std::unordered_map<const instruction*, instruction_ref> refs;
    for (auto it = m.begin(); it != m.end(); ++it) refs.emplace(&*it, it);
    for (std::size_t k = 0; k < a.allocations.size(); ++k) {
        auto ins = refs.at(a.allocations[k]);
        m.replace_instruction(ins, builtin::load{ins->get_shape(), a.intervals[k].offset}, std::vector<instruction_ref>{scratch});
    }
}

}  // namespace kiln
