// simplify_algebra: select first, then compute.
//
// A unary elementwise op whose result is only gathered from computes values nobody reads.
// torchvision's Mask R-CNN applies sigmoid to the masks of all 91 classes and keeps one per
// detection (`mask_prob[index, labels]`, exported as Flatten and Gather): sigmoid after the
// gather does 1/91 of the work. Reshape-like views between the two (same elements, same
// order) move with the gather.
#include "passes/rewrite_utils.hpp"
#include "passes/simplify_algebra_rules.hpp"

#include "ops/tensor_gather.hpp"
#include "ops/tensor_views.hpp"

namespace kiln::algebra {

using rewrite::is;

// gather(views(u(x)), idx) -> u(gather(views(x), idx)) for a unary pointwise op u that nothing
// but the views reads (a shape_of of it reads x's shape instead: u keeps the lens).
bool gather_before_pointwise(module& m, instruction_ref ins) {
    if (!is<op::gather>(ins)) return false;
    std::vector<instruction_ref> views;  // from the gather's input back towards u
    auto user = ins;
    auto v = ins->inputs()[0];
    while (v->get_operator().traits().reshape_like && v->inputs().size() == 1 && rewrite::only_used_by(m, v, user)) {
        views.push_back(v);
        user = v;
        v = v->inputs()[0];
    }
    const auto traits = v->get_operator().traits();
    if (!traits.pointwise || traits.nondeterministic || traits.side_effects || v->inputs().size() != 1 ||
        rewrite::is_output(m, v))
        return false;
    std::vector<instruction_ref> shape_readers;
    for (auto u : v->outputs()) {
        if (u == user) continue;
        if (!is<op::shape_of>(u)) return false;
        shape_readers.push_back(u);
    }
    if (std::count(v->outputs().begin(), v->outputs().end(), user) != 1) return false;
    auto x = v->inputs()[0];
    for (auto r : shape_readers) m.replace_instruction(r, r->get_operator(), {x});
    auto y = x;
    for (auto it = views.rbegin(); it != views.rend(); ++it) y = m.insert_instruction(ins, (*it)->get_operator(), {y});
    auto picked = m.insert_instruction(ins, ins->get_operator(), {y, ins->inputs()[1]});
    m.replace_instruction(ins, v->get_operator(), {picked});
    return true;
}

}  // namespace kiln::algebra
