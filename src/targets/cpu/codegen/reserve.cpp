// post_op_chains: what cpu::lowering will take after a convolution or matrix product
// (as oneDNN post-ops, or as Kiln's own kernels' epilogues and cpu::silu; in a generic
// program, cpu::dyn_primitive's post-ops and cpu::attention's scale and mask), so that the
// fusion pass leaves it there. The chains are cpu::find_post_ops' own, so the two passes
// cannot disagree about a pattern.
#include "targets/cpu/codegen/lowering.hpp"

#include "targets/cpu/fusion.hpp"
#include "targets/cpu/kernels/attention/attention.hpp"
#include "targets/cpu/kernels/dynamic/dyn_matmul.hpp"
#include "targets/cpu/kernels/dynamic/dyn_primitive.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"
#include "passes/rewrite_utils.hpp"

namespace kiln::cpu::codegen {

std::unordered_set<const instruction*> post_op_chains(module& m, const cpu_options* options) {
    std::unordered_set<const instruction*> out;
    // A generic program's attention: its scale and mask add stay for cpu::attention.
    if (options)
        for (const auto& mt : generic_attentions(m, *options))
            for (auto member : mt.between) out.insert(&*member);
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        // A generic program's convolution: what cpu::dyn_primitive takes as post-ops; its
        // products with constant weights: what cpu::dyn_matmul's packed epilogue takes.
        for (auto member : dyn_primitive_post_ops(ins)) out.insert(&*member);
        if (options)
            for (auto member : dyn_matmul_epilogue(*options, ins).members) out.insert(&*member);
        const bool conv = rewrite::is_any<op::convolution, op::deconvolution>(ins);
        if (!conv && !rewrite::is_any<op::matmul, op::gemm>(ins)) continue;
        const auto& s = ins->get_shape();
        if (!s.is_tensor() || s.dynamic() || s.get_type() != type::float32 || s.ndim() == 0) continue;
        // Every SiLU too (own_silu off): cpu::lowering computes the big ones as cpu::silu.
        const auto chain = find_post_ops(ins, conv ? 1 : s.ndim() - 1, true, out);
        for (auto member : chain.members) out.insert(&*member);
    }
    return out;
}

}  // namespace kiln::cpu::codegen
