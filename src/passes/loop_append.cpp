#include "passes/loop_append.hpp"

#include "ops/control_flow.hpp"
#include "ops/tensor_slice.hpp"

#include <algorithm>

namespace kiln {

namespace {

// The body's parameter named `name`, or end().
instruction_ref find_parameter(module& body, const std::string& name) {
    for (auto ins = body.begin(); ins != body.end(); ++ins)
        if (ins->is_param() && ins->param_name() == name) return ins;
    return body.end();
}

}  // namespace

void loop_append::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        const auto* l = ins->get_operator().any_cast<op::loop>();
        if (l == nullptr || ins->module_inputs().size() != 1) continue;
        module& body = *ins->module_inputs()[0];
        auto ret = body.get_return();
        if (ret == body.end()) continue;
        op::loop changed = *l;
        for (std::size_t j = 0; j < l->num_carried; ++j) {
            if (changed.is_appended(j) || 1 + j >= ret->inputs().size()) continue;
            auto out = ret->inputs()[1 + j];
            const auto* c = out->get_operator().any_cast<op::concat>();
            if (c == nullptr || out->inputs().size() != 2 || out->outputs().size() != 1 ||
                std::count(ret->inputs().begin(), ret->inputs().end(), out) != 1)
                continue;
            const shape& s = out->get_shape();
            if (!s.is_tensor() || s.ndim() < 1 || s.get_type() == type::string) continue;
            const auto rank = static_cast<std::int64_t>(s.ndim());
            if (c->axis != 0 && c->axis != -rank) continue;
            auto param = find_parameter(body, l->body_inputs.at(2 + j));
            if (param == body.end() || out->inputs()[0] != param || param->outputs().size() != 1) continue;
            // The @return reads the rows instead; the Concat is left to dead-code elimination.
            body.replace_argument(ret, out, out->inputs()[1]);
            changed.appended.push_back(j);
        }
        if (changed.appended.size() != l->appended.size())
            m.replace_instruction(ins, changed, ins->inputs(), ins->module_inputs());
    }
}

}  // namespace kiln
