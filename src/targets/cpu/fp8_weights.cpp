#include "targets/cpu/fp8_weights.hpp"

#include "ops/quantize.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/context.hpp>

namespace kiln::cpu {

void fold_fp8_weights::apply(module& m) const {
    host_context ctx;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!rewrite::is<op::dequantize_linear_op>(ins) || ins->get_shape().dynamic()) continue;
        const auto& in = ins->inputs();
        if (!is_fp8(in[0]->get_shape().get_type())) continue;
        bool constant = true;
        for (auto x : in) constant = constant && x->is_literal();
        if (!constant) continue;
        std::vector<argument> args;
        for (auto x : in) args.push_back(x->get_literal().get_argument());
        const auto value = ins->get_operator().compute(ctx, ins->get_shape(), args);
        m.replace_instruction(ins, m.insert_literal(ins, literal(value)));
    }
}

}  // namespace kiln::cpu
