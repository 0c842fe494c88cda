// The order a tensor's dims are stored in, for the generic program's kernels that keep
// their inputs' layout (cpu::dyn_concat, cpu::dyn_pad) or copy views into a walk order
// (the generic fused kernels): outermost first. Dims of length 1 may carry any stride.
#pragma once
#include <kiln/shape.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

namespace kiln::cpu {

// Whether `s` is packed in `order` (no gaps, no broadcasting, dims stored outermost first).
inline bool stored_in(const shape& s, const std::vector<std::size_t>& order) {
    std::size_t expect = 1;
    for (std::size_t i = order.size(); i-- > 0;) {
        const std::size_t d = order[i];
        if (s.lens()[d] != 1 && s.strides()[d] != expect) return false;
        expect *= s.lens()[d];
    }
    return true;
}

// The order `s` is packed in (strides descending; ties in logical order, so a row-major
// tensor's is 0, 1, ...), or empty when it is not packed.
inline std::vector<std::size_t> memory_order(const shape& s) {
    std::vector<std::size_t> order(s.ndim());
    std::iota(order.begin(), order.end(), std::size_t{0});
    const auto& st = s.strides();
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return st[a] > st[b]; });
    return stored_in(s, order) ? order : std::vector<std::size_t>{};
}

// The strides that store `lens` packed in `order`.
inline std::vector<std::size_t> strides_in(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& order) {
    std::vector<std::size_t> strides(lens.size());
    std::size_t step = 1;
    for (std::size_t i = order.size(); i-- > 0;) {
        strides[order[i]] = step;
        step *= lens[order[i]];
    }
    return strides;
}

}  // namespace kiln::cpu
