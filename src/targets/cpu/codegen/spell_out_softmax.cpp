#include "targets/cpu/codegen/spell_out_softmax.hpp"

#include "targets/cpu/kernels/attention/attention.hpp"

#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/reduce.hpp"
#include "ops/softmax.hpp"
#include "passes/rewrite_utils.hpp"

#include <cstdint>
#include <unordered_set>
#include <vector>

namespace kiln::cpu::codegen {

void spell_out_softmax::apply(module& m) const {
    std::unordered_set<const instruction*> attentions;
    if (options)
        for (const auto& mt : generic_attentions(m, *options)) attentions.insert(&*mt.between.front());
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        const bool soft = rewrite::is<op::softmax>(ins);
        if (!soft && !rewrite::is<op::log_softmax>(ins)) continue;
        if (attentions.count(&*ins)) continue;
        const auto x = ins->inputs().front();
        const auto& s = x->get_shape();
        if (!s.is_tensor() || !s.dynamic() || s.get_type() != type::float32 || s.ndim() == 0) continue;
        const auto axis = soft ? ins->get_operator().get<op::softmax>().axis : ins->get_operator().get<op::log_softmax>().axis;
        const auto last = static_cast<std::int64_t>(s.ndim()) - 1;
        if (axis != last && axis != -1) continue;
        const std::vector<std::int64_t> axes{last};
        op::reduce_max rmax;
        rmax.axes = axes;
        op::reduce_sum rsum;
        rsum.axes = axes;
        auto top = m.insert_instruction(ins, rmax, {x});
        auto shifted = m.insert_instruction(ins, op::sub_op{}, {x, top});
        auto e = m.insert_instruction(ins, op::exp_op{}, {shifted});
        auto sum = m.insert_instruction(ins, rsum, {e});
        if (soft) {
            m.replace_instruction(ins, op::div_op{}, {e, sum});
        } else {
            auto log_sum = m.insert_instruction(ins, op::log_op{}, {sum});
            m.replace_instruction(ins, op::sub_op{}, {shifted, log_sum});
        }
    }
}

}  // namespace kiln::cpu::codegen
