// simplify_algebra: channel shuffles as gathers of constant channels.
//
// ShuffleNet (and other grouped-convolution networks) mix channel groups by reshaping
// [N, C, ...] to [N, g, C/g, ...], swapping the two channel axes and reshaping back, then
// split the result into halves. Each step is a view or a copy in a layout that a target
// must materialize; together they are one gather along the channels with a constant
// permutation, and a slice of that is a gather of the slice's part of the permutation. A
// target then moves each half's channels once, in whatever layout the activations are
// (the cpu target's channel_gather reads them from the parts of the concat before it).
#include "passes/rewrite_utils.hpp"
#include "passes/simplify_algebra_rules.hpp"

#include "ops/tensor_gather.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"

#include <algorithm>

namespace kiln::algebra {

namespace {

using rewrite::is;

instruction_ref index_literal(module& m, instruction_ref pos, const std::vector<std::int64_t>& v) {
    return m.insert_literal(pos, rewrite::make_literal(shape(type::int64, {v.size()}),
                                                       std::vector<double>(v.begin(), v.end())));
}

}  // namespace

// reshape(transpose{0, 2, 1, 3, ...}(reshape(x, [N, g, C/g, S...])), [N, C, S...])
//   -> gather{axis 1}(x, perm) with perm[c] = (c % g) * (C / g) + c / g.
bool channel_shuffle_to_gather(module& m, instruction_ref ins) {
    if (!is<op::reshape>(ins)) return false;
    auto t = ins->inputs()[0];
    const auto* tr = t->get_operator().any_cast<op::transpose>();
    if (tr == nullptr) return false;
    auto r = t->inputs()[0];
    if (!is<op::reshape>(r)) return false;
    auto x = r->inputs()[0];
    // The pass skips dynamic results, not dynamic inputs.
    if (x->get_shape().dynamic() || r->get_shape().dynamic() || ins->get_shape().dynamic()) return false;
    const auto& xl = x->get_shape().lens();
    const auto& rl = r->get_shape().lens();
    const auto& out = ins->get_shape().lens();
    const std::size_t rank = xl.size();
    if (rank < 2 || rl.size() != rank + 1 || out != xl) return false;
    // perm swaps the two channel axes and keeps every other.
    if (tr->perm.size() != rank + 1 || tr->perm[0] != 0 || tr->perm[1] != 2 || tr->perm[2] != 1) return false;
    for (std::size_t i = 3; i <= rank; ++i)
        if (tr->perm[i] != static_cast<std::int64_t>(i)) return false;
    const std::size_t c = xl[1], g = rl[1], per = rl[2];
    if (rl[0] != xl[0] || g * per != c || g < 2 || per < 2) return false;
    for (std::size_t i = 2; i < rank; ++i)
        if (rl[i + 1] != xl[i]) return false;
    std::vector<std::int64_t> perm(c);
    for (std::size_t k = 0; k < c; ++k) perm[k] = static_cast<std::int64_t>((k % g) * per + k / g);
    m.replace_instruction(ins, op::gather{1}, {x, index_literal(m, ins, perm)});
    return true;
}

// slice(gather{axis a}(x, idx), on axis a only) -> gather{axis a}(x, idx[the slice]) for 1-D
// constant indices: the slice's channels are picked straight from x.
bool slice_of_gather(module& m, instruction_ref ins) {
    const auto* s = ins->get_operator().any_cast<op::slice>();
    if (s == nullptr) return false;
    auto g = ins->inputs()[0];
    const auto* go = g->get_operator().any_cast<op::gather>();
    if (go == nullptr || g->inputs().size() != 2) return false;
    // A static gather may read a dynamic tensor (Mask R-CNN's boxes [?, 4]): left alone.
    if (g->get_shape().dynamic() || g->inputs()[0]->get_shape().dynamic()) return false;
    const auto& gl = g->get_shape().lens();
    const auto rank = static_cast<std::int64_t>(gl.size());
    const std::int64_t a = go->axis < 0 ? go->axis + rank : go->axis;
    if (a < 0 || a >= rank) return false;
    auto idx = rewrite::constant_indices(g->inputs()[1], g->inputs()[0]->get_shape().lens().at(static_cast<std::size_t>(a)));
    if (!idx || idx->size() != gl[static_cast<std::size_t>(a)]) return false;
    const auto plan = s->make_plan(gl);
    for (std::int64_t d = 0; d < rank; ++d) {
        const auto i = static_cast<std::size_t>(d);
        if (d != a && (plan.first[i] != 0 || plan.step[i] != 1 || plan.lens[i] != gl[i])) return false;
    }
    const auto i = static_cast<std::size_t>(a);
    if (plan.lens[i] == 0) return false;
    std::vector<std::int64_t> picked(plan.lens[i]);
    for (std::size_t k = 0; k < picked.size(); ++k)
        picked[k] = (*idx)[static_cast<std::size_t>(plan.first[i] + static_cast<std::int64_t>(k) * plan.step[i])];
    m.replace_instruction(ins, op::gather{a}, {g->inputs()[0], index_literal(m, ins, picked)});
    return true;
}

}  // namespace kiln::algebra
