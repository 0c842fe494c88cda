// Replaces each attention the shared matcher finds (passes/attention_match.hpp) that the
// kernel takes by one cpu::attention (attention.hpp).
#include "targets/cpu/kernels/attention/attention.hpp"

#include "targets/cpu/kernels/attention/attention_geometry.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "passes/attention_match.hpp"

#include <kiln/builtin_ops.hpp>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace kiln::cpu {

using namespace attention_detail;

namespace {

using attention_match::match;

// The scalar a select fills masked scores with.
float fill_of(const match& mt) {
    const auto x = (*mt.select)->inputs()[mt.fill_first ? 1 : 2];
    return x->get_literal().to_vector<float>().at(0);
}

// The select's mask is bool, the add's float32 (what the kernel reads).
bool mask_type_fits(const match& mt) {
    const auto& s = (*mt.mask)->get_shape();
    return s.is_tensor() && s.get_type() == (mt.select ? type::bool_ : type::float32);
}

bool fits(const match& mt, shape& dst) {
    auto q = mt.qk->inputs()[0], kt = mt.qk->inputs()[1], v = mt.pv->inputs()[1];
    for (auto x : {q, kt, v, mt.qk, mt.pv})
        if (!f32_static(x)) return false;
    const shape &qs = q->get_shape(), &ks = kt->get_shape(), &vs = v->get_shape();
    if (!operand_problem(qs, ks, vs).empty()) return false;
    const auto g = geometry_of(qs, ks, vs);
    if (mt.mask && ((*mt.mask)->get_shape().dynamic() || !mask_fits(g, (*mt.mask)->get_shape(), mt.select.has_value())))
        return false;
    dst = transposed_write_shape(mt.pv, mt.pv->get_shape().lens()).value_or(mt.pv->get_shape().as_standard());
    return true;
}

bool attention_enabled(const cpu_options& o) { return o.attention && has_avx2_fma(); }

// A generic program's attention: float32 operands of one rank, some of them dynamic (a
// decode step's query row is static over keys of any length: its result is static too), a
// float32 mask added or a bool one selecting. Sizes are checked when it runs.
bool generic_fits(const match& mt) {
    auto q = mt.qk->inputs()[0], kt = mt.qk->inputs()[1], v = mt.pv->inputs()[1];
    const auto dynamic = [](instruction_ref x) { return x->get_shape().is_tensor() && x->get_shape().dynamic(); };
    if (!dynamic(q) && !dynamic(kt) && !dynamic(v) && !dynamic(mt.pv)) return false;
    for (auto x : {q, kt, v, mt.qk, mt.pv})
        if (!f32_tensor(x) || x->get_shape().ndim() != q->get_shape().ndim()) return false;
    return !mt.mask || (mask_type_fits(mt) && (*mt.mask)->get_shape().ndim() <= q->get_shape().ndim());
}

attention op_for(const lower_env& env, const match& mt) {
    attention op;
    op.scale = mt.scale;
    op.has_mask = mt.mask.has_value();
    op.exact_exp = !env.ctx.fast_math();
    if (mt.select) {
        op.select = true;
        op.fill_first = mt.fill_first;
        op.fill = fill_of(mt);
    }
    return op;
}

// The matches' instructions replaced by one attention (the softmax, the mask add, the
// scale, QK^T); the new instruction takes pv's place.
void replace_match(module& m, const match& mt, const attention& op, std::vector<instruction_ref> args) {
    m.replace_instruction(mt.pv, op, std::move(args));
    for (auto x : mt.between) m.remove_instruction(x);  // softmax, then the add, the scale
    m.remove_instruction(mt.qk);
}

}  // namespace

std::vector<match> generic_attentions(module& m, const cpu_options& options) {
    std::vector<match> found;
    if (!attention_enabled(options)) return found;
    for (auto& mt : attention_match::find_all(m, true))
        if (generic_fits(mt)) found.push_back(mt);
    return found;
}

void fuse_attention(lower_env& env) {
    if (!attention_enabled(env.ctx.options())) return;
    for (auto& mt : generic_attentions(env.m, env.ctx.options())) {
        attention op = op_for(env, mt);
        op.generic = true;  // float32 products (a generic program's matmuls are float32 too)
        std::vector<instruction_ref> args{mt.qk->inputs()[0], mt.qk->inputs()[1], mt.pv->inputs()[1]};
        if (mt.mask) args.push_back(*mt.mask);
        replace_match(env.m, mt, op, std::move(args));
    }
    for (auto& mt : attention_match::find_all(env.m)) {
        shape dst;
        if (!fits(mt, dst)) continue;
        attention op = op_for(env, mt);
        // A bf16 program's products (widen_reduced.hpp) take the attention with them: its
        // activations Q, K, V and the probabilities in bf16 (KILN_CPU_BF16_ACTIVATIONS=0: not).
        op.bf16 = env.ctx.bf16_matmuls && env.ctx.options().bf16_activations;
        const auto g = geometry_of(mt.qk->inputs()[0]->get_shape(), mt.qk->inputs()[1]->get_shape(),
                                   mt.pv->inputs()[1]->get_shape());
        std::vector<instruction_ref> args{mt.qk->inputs()[0], mt.qk->inputs()[1], mt.pv->inputs()[1]};
        if (mt.mask) args.push_back(*mt.mask);
        // A part of the scratch per thread (attention.cpp); fewer threads run where a program
        // compiled for fewer runs on more.
        const std::size_t parts = std::max<std::size_t>(1, env.ctx.options().threads);
        args.push_back(
            env.m.insert_instruction(mt.pv, builtin::allocate{shape(type::uint8, {g.scratch_bytes(parts)})}, {}));
        args.push_back(env.m.insert_instruction(mt.pv, builtin::allocate{dst}, {}));
        replace_match(env.m, mt, op, std::move(args));
    }
}

}  // namespace kiln::cpu
