#include "passes/schedule.hpp"

#include "passes/memory_coloring.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace kiln {

namespace {

constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

enum class kind { fixed, allocate, normal, last };

// The module as a dependency graph over instruction indices (original order).
struct graph {
    std::vector<instruction_ref> refs;
    std::vector<kind> kinds;
    std::vector<std::vector<std::size_t>> preds, succs;  // between normal/last nodes only
    std::vector<std::vector<std::size_t>> allocs;         // allocate inputs of each node
    std::vector<std::vector<std::size_t>> roots;          // distinct planned buffers it reads or writes
    std::vector<std::size_t> bytes;                       // of each planned allocate, else 0
};

void add_edge(graph& g, std::size_t from, std::size_t to) {
    if (from == to || std::find(g.preds[to].begin(), g.preds[to].end(), from) != g.preds[to].end()) return;
    g.preds[to].push_back(from);
    g.succs[from].push_back(to);
}

graph build_graph(module& m) {
    graph g;
    std::unordered_map<const instruction*, std::size_t> index;
    for (auto it = m.begin(); it != m.end(); ++it) {
        index.emplace(&*it, g.refs.size());
        g.refs.push_back(it);
    }
    const std::size_t n = g.refs.size();
    g.kinds.assign(n, kind::normal);
    g.preds.resize(n);
    g.succs.resize(n);
    g.allocs.resize(n);
    g.roots.resize(n);
    g.bytes.assign(n, 0);
    const bool has_return = m.get_return() != m.end();
    std::vector<std::size_t> root(n, none);
    std::vector<bool> returned(n, false);
    std::size_t last_effect = none;
    for (std::size_t i = 0; i < n; ++i) {
        auto ins = g.refs[i];
        if (ins->is_param() || ins->is_literal()) {
            g.kinds[i] = kind::fixed;
            continue;
        }
        if (rewrite::is<builtin::allocate>(ins)) {
            g.kinds[i] = kind::allocate;
            root[i] = i;
            g.bytes[i] = ins->get_shape().bytes();
            continue;
        }
        if (ins->is_return() || (!has_return && i + 1 == n)) g.kinds[i] = kind::last;
        std::ptrdiff_t alias = -1;
        if (!ins->is_return()) alias = ins->get_operator().output_alias(to_shapes(ins->inputs()));
        for (std::size_t k = 0; k < ins->inputs().size(); ++k) {
            std::size_t a = index.at(&*ins->inputs()[k]);
            if (g.kinds[a] == kind::allocate) g.allocs[i].push_back(a);
            if (g.kinds[a] == kind::normal) add_edge(g, a, i);
            if (root[a] != none) {
                if (std::find(g.roots[i].begin(), g.roots[i].end(), root[a]) == g.roots[i].end())
                    g.roots[i].push_back(root[a]);
                if (ins->is_return()) returned[root[a]] = true;
            }
            if (static_cast<std::ptrdiff_t>(k) == alias) {
                root[i] = root[a];
                // Writing into a computed value: its earlier readers must stay earlier.
                if (g.kinds[a] == kind::normal)
                    for (auto u : ins->inputs()[k]->outputs()) {
                        std::size_t ui = index.at(&*u);
                        if (ui < i && g.kinds[ui] == kind::normal) add_edge(g, ui, i);
                    }
            }
        }
        auto t = ins->get_operator().traits();
        if (t.side_effects || t.nondeterministic) {
            if (last_effect != none) add_edge(g, last_effect, i);
            last_effect = i;
        }
    }
    // Buffers handed to the caller are not planned: they cost the arena nothing.
    for (std::size_t i = 0; i < n; ++i)
        if (returned[i]) g.bytes[i] = 0;
    for (auto& r : g.roots)
        r.erase(std::remove_if(r.begin(), r.end(), [&](std::size_t b) { return g.bytes[b] == 0; }), r.end());
    return g;
}

enum class tie_break { original_order, depth_first };

// A greedy list schedule: the order of all instruction indices.
std::vector<std::size_t> greedy_order(const graph& g, tie_break tb) {
    const std::size_t n = g.refs.size();
    std::vector<std::size_t> order, waiting(n, 0), remaining(n, 0), emitted_at(n, none);
    std::vector<std::size_t> ready;
    std::size_t last = none;
    for (std::size_t i = 0; i < n; ++i) {
        if (g.kinds[i] == kind::fixed) order.push_back(i);
        if (g.kinds[i] == kind::normal || g.kinds[i] == kind::last)
            for (auto r : g.roots[i]) ++remaining[r];
        if (g.kinds[i] == kind::normal) {
            waiting[i] = g.preds[i].size();
            if (waiting[i] == 0) ready.push_back(i);
        }
        if (g.kinds[i] == kind::last) last = i;
        // An allocate nobody uses (dead code) goes first, where it costs nothing extra.
        if (g.kinds[i] == kind::allocate && g.refs[i]->outputs().empty()) order.push_back(i);
    }
    std::vector<bool> alloc_done(n, false);
    auto emit = [&](std::size_t i) {
        for (auto a : g.allocs[i])
            if (!alloc_done[a]) {
                alloc_done[a] = true;
                order.push_back(a);
            }
        emitted_at[i] = order.size();
        order.push_back(i);
        for (auto r : g.roots[i]) --remaining[r];
    };
    auto score = [&](std::size_t i) {
        long long s = 0;
        for (auto a : g.allocs[i])
            if (!alloc_done[a]) s += static_cast<long long>(g.bytes[a]);
        for (auto r : g.roots[i])
            if (remaining[r] == 1) s -= static_cast<long long>(g.bytes[r]);
        return s;
    };
    // Position of the latest-computed input: higher means "continues what was just done".
    auto recency = [&](std::size_t i) {
        std::size_t r = 0;
        for (auto p : g.preds[i]) r = std::max(r, emitted_at[p] == none ? 0 : emitted_at[p] + 1);
        return r;
    };
    while (!ready.empty()) {
        std::size_t best = 0;
        for (std::size_t k = 1; k < ready.size(); ++k) {
            auto a = ready[k], b = ready[best];
            auto sa = score(a), sb = score(b);
            if (sa != sb) {
                if (sa < sb) best = k;
                continue;
            }
            if (tb == tie_break::depth_first) {
                auto ra = recency(a), rb = recency(b);
                if (ra != rb) {
                    if (ra > rb) best = k;
                    continue;
                }
            }
            if (a < b) best = k;
        }
        std::size_t i = ready[best];
        ready.erase(ready.begin() + static_cast<std::ptrdiff_t>(best));
        emit(i);
        for (auto s : g.succs[i])
            if (g.kinds[s] == kind::normal && --waiting[s] == 0) ready.push_back(s);
    }
    if (last != none) emit(last);
    return order;
}

void reorder(module& m, const graph& g, const std::vector<std::size_t>& order) {
    for (auto i : order) m.move_instruction(g.refs[i], m.end());
}

std::size_t arena_of(const module& m, std::size_t alignment) {
    auto buffers = buffer_intervals(m);
    return assign_offsets(buffers, alignment);
}

}  // namespace

void schedule::apply(module& m) const {
    if (m.get_parameter(builtin::scratch_parameter) != m.end()) return;  // already planned
    if (m.get_return() == m.end()) return;  // the last instruction is the result: keep the order
    if (buffer_intervals(m).empty()) return;  // nothing to plan (not lowered)
    auto g = build_graph(m);
    std::vector<std::size_t> original(g.refs.size());
    for (std::size_t i = 0; i < original.size(); ++i) original[i] = i;
    std::size_t best_arena = arena_of(m, alignment);
    std::vector<std::size_t> best = original;
    for (auto tb : {tie_break::original_order, tie_break::depth_first}) {
        auto order = greedy_order(g, tb);
        if (order.size() != g.refs.size()) continue;  // defensive: a cycle would leave nodes out
        reorder(m, g, order);
        auto arena = arena_of(m, alignment);
        if (arena < best_arena) {
            best_arena = arena;
            best = order;
        }
    }
    reorder(m, g, best);
}

}  // namespace kiln
