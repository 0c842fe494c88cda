// Replaces each attention the shared matcher finds (passes/attention_match.hpp) that the
// kernel takes by one cpu::attention (attention.hpp).
#include "targets/cpu/kernels/attention/attention.hpp"

#include "targets/cpu/kernels/attention/attention_geometry.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "passes/attention_match.hpp"

#include <kiln/builtin_ops.hpp>

#include <cstdlib>
#include <vector>

namespace kiln::cpu {

using namespace attention_detail;

namespace {

using attention_match::match;

bool fits(const match& mt, shape& dst) {
    if (mt.select) return false;  // the kernel adds its mask; a select (where) stays on oneDNN and the softmax
    auto q = mt.qk->inputs()[0], kt = mt.qk->inputs()[1], v = mt.pv->inputs()[1];
    for (auto x : {q, kt, v, mt.qk, mt.pv})
        if (!f32_static(x)) return false;
    const shape &qs = q->get_shape(), &ks = kt->get_shape(), &vs = v->get_shape();
    if (!operand_problem(qs, ks, vs).empty()) return false;
    const auto g = geometry_of(qs, ks, vs);
    if (mt.mask && (!f32_static(*mt.mask) || !mask_fits(g, (*mt.mask)->get_shape()))) return false;
    dst = transposed_write_shape(mt.pv, mt.pv->get_shape().lens()).value_or(mt.pv->get_shape().as_standard());
    return true;
}

bool attention_enabled(const lower_env& env) { return env.ctx.options().attention && has_avx2_fma(); }

}  // namespace

void fuse_attention(lower_env& env) {
    if (!attention_enabled(env)) return;
    for (auto& mt : attention_match::find_all(env.m)) {
        shape dst;
        if (!fits(mt, dst)) continue;
        attention op;
        op.scale = mt.scale;
        op.has_mask = mt.mask.has_value();
        op.exact_exp = !env.ctx.fast_math();
        // A bf16 program's products (widen_reduced.hpp) take the attention with them: its
        // activations Q, K, V and the probabilities in bf16 (KILN_CPU_BF16_ACTIVATIONS=0: not).
        op.bf16 = env.ctx.bf16_matmuls && env.ctx.options().bf16_activations;
        const auto g = geometry_of(mt.qk->inputs()[0]->get_shape(), mt.qk->inputs()[1]->get_shape(),
                                   mt.pv->inputs()[1]->get_shape());
        std::vector<instruction_ref> args{mt.qk->inputs()[0], mt.qk->inputs()[1], mt.pv->inputs()[1]};
        if (mt.mask) args.push_back(*mt.mask);
        args.push_back(env.m.insert_instruction(mt.pv, builtin::allocate{shape(type::uint8, {g.scratch_bytes()})}, {}));
        args.push_back(env.m.insert_instruction(mt.pv, builtin::allocate{dst}, {}));
        env.m.replace_instruction(mt.pv, op, args);
        for (auto x : mt.between) env.m.remove_instruction(x);  // softmax, then the add, the scale
        env.m.remove_instruction(mt.qk);
    }
}

}  // namespace kiln::cpu
