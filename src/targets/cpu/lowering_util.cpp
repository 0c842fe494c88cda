#include "targets/cpu/lowering_util.hpp"

#include "targets/cpu/op_misc.hpp"

#include <algorithm>
#include <numeric>

namespace kiln::cpu {

std::vector<std::size_t> strides_like(const shape& ref, const std::vector<std::size_t>& lens) {
    const std::size_t r = lens.size();
    if (ref.dynamic() || ref.ndim() != r || !ref.packed()) return shape::standard_strides(lens);
    std::vector<std::size_t> order(r);
    std::iota(order.begin(), order.end(), 0);
    const auto& rs = ref.strides();
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return rs[a] > rs[b]; });
    std::vector<std::size_t> strides(r);
    std::size_t acc = 1;
    for (std::size_t k = r; k-- > 0;) {
        strides[order[k]] = acc;
        acc *= lens[order[k]];
    }
    return strides;
}

shape packed_like(const shape& x) { return shape(x.get_type(), x.lens(), strides_like(x, x.lens())); }

shape channels_last(const shape& x) { return shape(x.get_type(), x.lens(), channels_last_strides(x.lens())); }

instruction_ref insert_reorder(lower_env& env, instruction_ref pos, instruction_ref x, const shape& layout) {
    auto buffer = env.m.insert_instruction(pos, builtin::allocate{layout}, {});
    return env.m.insert_instruction(pos, reorder{}, {x, buffer});
}

instruction_ref ensure_layout(lower_env& env, instruction_ref pos, instruction_ref x, const shape& layout) {
    const auto& s = x->get_shape();
    if (s == layout) return x;
    // Strides of dims of length 1 never matter.
    bool same = s.lens() == layout.lens() && s.get_type() == layout.get_type();
    for (std::size_t d = 0; same && d < s.ndim(); ++d)
        same = s.lens()[d] == 1 || s.strides()[d] == layout.strides()[d];
    return same ? x : insert_reorder(env, pos, x, layout);
}

}  // namespace kiln::cpu
