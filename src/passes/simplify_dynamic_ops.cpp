#include "passes/simplify_dynamic_ops.hpp"

#include "ops/tensor_generate.hpp"
#include "ops/tensor_layout.hpp"
#include "ops/tensor_resize.hpp"
#include "ops/tensor_select.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/context.hpp>

#include <unordered_map>

namespace kiln {

namespace {

template <class... Ts>
struct op_list {};
// Run-time forms that know their own static form.
using dynamic_forms = op_list<op::reshape_dynamic, op::squeeze_dynamic, op::expand_dynamic, op::slice_dynamic,
                              op::split_dynamic, op::pad_dynamic, op::tile_dynamic, op::one_hot_dynamic,
                              op::topk_dynamic, op::resize_dynamic, op::col2im_dynamic>;

template <class... Ts>
bool is_dynamic_form(const operation& o, op_list<Ts...>) {
    return (... || (o.any_cast<Ts>() != nullptr));
}

template <class... Ts>
std::optional<op::static_form> static_form_of(const operation& o, const op::known_inputs& k, op_list<Ts...>) {
    std::optional<op::static_form> r;
    ((r || o.any_cast<Ts>() == nullptr ? void() : void(r = o.any_cast<Ts>()->to_static(k))), ...);
    return r;
}

bool small(const shape& s, std::size_t limit) {
    if (s.is_tuple()) {
        for (auto& e : s.sub_shapes())
            if (!small(e, limit)) return false;
        return true;
    }
    return s.is_tensor() && !s.dynamic() && s.elements() <= limit;
}

// Computes values that follow from literals and static shapes, without changing the module.
class evaluator {
public:
    explicit evaluator(std::size_t limit) : limit_(limit) {}

    std::optional<argument> value(instruction_ref ins) {
        if (ins->is_literal()) return ins->get_literal().get_argument();
        if (ins->is_param() || ins->is_return()) return std::nullopt;
        if (auto it = cache_.find(&*ins); it != cache_.end()) return it->second;
        auto r = compute(ins);
        cache_.emplace(&*ins, r);
        return r;
    }
    void forget() { cache_.clear(); }

private:
    std::optional<argument> compute(instruction_ref ins) {
        const auto& o = ins->get_operator();
        const auto& in = ins->inputs();
        host_context ctx;
        // Fixed dimensions are known whatever the values.
        if (auto* s = o.any_cast<op::shape_of>()) {
            auto dims = s->known_dims(in[0]->get_shape());
            if (!dims) return std::nullopt;
            return literal(shape(type::int64, {dims->size()}), *dims).get_argument();
        }
        if (o.any_cast<op::size_of>() && in[0]->get_shape().is_tensor() && !in[0]->get_shape().dynamic())
            return literal(static_cast<std::int64_t>(in[0]->get_shape().elements())).get_argument();
        if (o.traits().nondeterministic || o.traits().side_effects || o.traits().builtin || !ins->module_inputs().empty() ||
            !o.has_compute())
            return std::nullopt;
        if (!ins->get_shape().dynamic() && !small(ins->get_shape(), limit_)) return std::nullopt;
        std::vector<argument> args;
        std::vector<shape> shapes;
        for (auto a : in) {
            if (!a->is_literal() && !small(a->get_shape(), limit_)) return std::nullopt;
            auto v = value(a);
            if (!v) return std::nullopt;
            args.push_back(*v);
            shapes.push_back(v->get_shape());
        }
        try {
            auto r = o.compute(ctx, o.compute_shape(shapes, {}), args);
            if (!small(r.get_shape(), std::max<std::size_t>(limit_, 1u << 20))) return std::nullopt;
            return r;
        } catch (const error&) {
            return std::nullopt;  // left for run time, which reports it in context
        }
    }

    std::size_t limit_;
    std::unordered_map<const instruction*, std::optional<argument>> cache_;
};

// Rewrites that need new instructions rather than one static op.
bool rewrite_special(module& m, instruction_ref ins, evaluator& ev) {
    const auto& o = ins->get_operator();
    if (auto* c = o.any_cast<op::constant_of_shape>()) {
        auto v = ev.value(ins->inputs()[0]);
        if (!v) return false;
        auto dims = op::read_ints(*v, "constant_of_shape", "shape");
        auto scalar = m.insert_literal(ins, literal(c->value.get_argument().reshape(shape(c->value.get_shape().get_type()))));
        m.replace_instruction(ins, op::broadcast{dims}, {scalar});
        return true;
    }
    if (auto* c = o.any_cast<op::center_crop_pad>()) {
        auto x = ins->inputs()[0];
        auto v = ev.value(ins->inputs()[1]);
        if (!v || x->get_shape().dynamic()) return false;
        auto p = op::plan_center_crop_pad(x->get_shape().lens(), op::read_ints(*v, "center_crop_pad", "shape"), c->axes,
                                          "center_crop_pad");
        if (!p.axes.empty()) x = m.insert_instruction(ins, op::slice{p.axes, p.starts, p.ends, {}}, {x});
        m.replace_instruction(ins, op::pad{"constant", p.pads, {}}, {x});
        return true;
    }
    if (auto* s = o.any_cast<op::split_dynamic>(); s && ins->inputs().size() == 1) {
        const auto& xs = ins->inputs()[0]->get_shape();
        if (xs.dynamic()) return false;
        auto a = op::normalize_axis(s->axis, xs.ndim(), "split_dynamic");
        m.replace_instruction(ins, op::split{s->axis, op::even_split(xs.lens()[a], s->count)}, {ins->inputs()[0]});
        return true;
    }
    return false;
}

// Replaces a fully known dynamic result with literals (tuple results through their
// get_tuple_elem users).
bool fold(module& m, instruction_ref ins, evaluator& ev) {
    auto v = ev.value(ins);
    if (!v) return false;
    if (!v->get_shape().is_tuple()) {
        m.replace_instruction(ins, m.insert_literal(ins, literal(*v)));
        return true;
    }
    bool any = false;
    for (auto user : std::vector<instruction_ref>(ins->outputs())) {
        auto* g = user->get_operator().any_cast<builtin::get_tuple_elem>();
        if (g == nullptr || g->index >= v->elements().size()) continue;
        m.replace_instruction(user, m.insert_literal(user, literal(v->elements()[g->index])));
        any = true;
    }
    return any;
}

// Whether the op's result's shape depends on its inputs' values (range, nonzero): shape
// inference may know it already from literal inputs, but the op still has to be folded.
bool value_shaped(const instruction& ins) {
    std::vector<shape> plain;
    for (auto in : ins.inputs()) plain.push_back(in->get_shape().with_values({}));
    try {
        return ins.get_operator().compute_shape(plain, ins.module_inputs()).dynamic();
    } catch (const error&) {
        return false;
    }
}

}  // namespace

void simplify_dynamic_ops::apply(module& m) const {
    evaluator ev(max_eval_elements);
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (ins->is_param() || ins->is_literal() || ins->is_return()) continue;
        const auto& o = ins->get_operator();
        bool changed = false;
        try {
            if (o.any_cast<op::shape_of>() || o.any_cast<op::size_of>()) {
                changed = fold(m, ins, ev);
            } else if (is_dynamic_form(o, dynamic_forms{})) {
                op::known_inputs k;
                for (auto a : ins->inputs()) k.push_back(ev.value(a));
                if (auto f = static_form_of(o, k, dynamic_forms{})) {
                    std::vector<instruction_ref> args;
                    for (auto i : f->inputs) args.push_back(ins->inputs()[i]);
                    m.replace_instruction(ins, f->op, args);
                    changed = true;
                } else {
                    changed = rewrite_special(m, ins, ev);
                }
            } else if (o.any_cast<op::constant_of_shape>() || o.any_cast<op::center_crop_pad>()) {
                changed = rewrite_special(m, ins, ev);
            } else if ((ins->get_shape().dynamic() || value_shaped(*ins)) && !ins->get_shape().is_sequence() &&
                       !ins->get_shape().is_optional()) {
                // range, nonzero, unique, compress, ... with every input known.
                changed = fold(m, ins, ev);
            }
        } catch (const error&) {
            changed = false;  // invalid for these shapes: left for run time to report
        }
        if (changed) ev.forget();  // shapes downstream changed
    }
}

}  // namespace kiln
