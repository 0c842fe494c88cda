// Finds attention in the IR and replaces it by one cpu::attention (attention.hpp).
#include "targets/cpu/kernels/attention/attention.hpp"

#include "targets/cpu/kernels/attention/attention_geometry.hpp"
#include "targets/cpu/cpu_features.hpp"

#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/softmax.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

using namespace attention_detail;

namespace {

using rewrite::is;
using rewrite::is_any;

bool is_scalar_literal(instruction_ref x) { return x->is_literal() && x->get_shape().elements() == 1; }

float scalar_value(instruction_ref x) { return x->get_literal().to_vector<float>().at(0); }

// The one reader of x, when it has exactly one.
std::optional<instruction_ref> only_user(instruction_ref x) {
    if (x->outputs().size() != 1) return std::nullopt;
    return x->outputs().front();
}

struct match {
    instruction_ref qk, pv;
    std::vector<instruction_ref> between;  // scale, mask add, softmax: removed after
    std::optional<instruction_ref> mask;
    float scale = 1.0f;
};

std::optional<match> match_at(instruction_ref sm) {
    const auto axis = sm->get_operator().to_value().at("axis").get_int64();
    if (sm->get_shape().dynamic()) return std::nullopt;  // a generic program's: no kernel for ranges
    const auto rank = static_cast<std::int64_t>(sm->get_shape().ndim());
    if (rank < 3 || (axis != -1 && axis != rank - 1)) return std::nullopt;
    match mt;
    auto pv = only_user(sm);
    if (!pv || !is<op::matmul>(*pv) || (*pv)->inputs().size() != 2 || (*pv)->inputs()[0] != sm) return std::nullopt;
    mt.pv = *pv;
    mt.between.push_back(sm);
    auto x = sm->inputs().at(0);
    if (is<op::add_op>(x) && x->outputs().size() == 1) {
        const auto& in = x->inputs();
        const bool scores_first =
            in[0]->get_shape().lens() == x->get_shape().lens() && is_any<op::mul_op, op::div_op, op::matmul>(in[0]);
        const std::size_t scores = scores_first ? 0 : 1;
        mt.mask = in[1 - scores];
        mt.between.push_back(x);
        x = in[scores];
    }
    if (is_any<op::mul_op, op::div_op>(x) && x->outputs().size() == 1) {
        const auto& in = x->inputs();
        const bool div = is<op::div_op>(x);
        std::optional<std::size_t> c;
        if (is_scalar_literal(in[1])) c = 1;
        else if (!div && is_scalar_literal(in[0])) c = 0;
        if (!c) return std::nullopt;
        const float value = scalar_value(in[*c]);
        mt.scale = div ? 1.0f / value : value;
        mt.between.push_back(x);
        x = in[1 - *c];
    }
    if (!is<op::matmul>(x) || x->outputs().size() != 1 || x->inputs().size() != 2) return std::nullopt;
    mt.qk = x;
    return mt;
}

bool fits(const match& mt, shape& dst) {
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
    std::vector<match> found;
    for (auto ins = env.m.begin(); ins != env.m.end(); ++ins)
        if (is<op::softmax>(ins))
            if (auto mt = match_at(ins)) found.push_back(*mt);
    for (auto& mt : found) {
        shape dst;
        if (!fits(mt, dst)) continue;
        attention op;
        op.scale = mt.scale;
        op.has_mask = mt.mask.has_value();
        op.exact_exp = !env.ctx.fast_math();
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
