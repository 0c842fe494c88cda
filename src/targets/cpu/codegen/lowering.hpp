// The cpu target's passes for memory-bound work.
//
//   fusion pass (before cpu::lowering): fuse_pointwise with the cpu rules: only ops and
//     types the kernels handle, and never the elementwise ops that cpu::lowering makes
//     post-ops of the convolution or matrix product feeding them (post_op_chains).
//   codegen::lowering (after cpu::lowering): every `fused` instruction, and every single
//     elementwise op oneDNN did not take, becomes a cpu::fused_kernel; the module's
//     kernels are generated and compiled together, once per program (see kernel_op.hpp).
//
// KILN_CPU_FUSION=0 (cpu_options::fusion) turns grouping off (single ops still get
// kernels), for measuring.
#pragma once
#include "targets/cpu/cpu_options.hpp"

#include <kiln/module.hpp>
#include <kiln/pass.hpp>

#include <memory>
#include <string>
#include <unordered_set>

namespace kiln::cpu::codegen {

pass make_fusion_pass(const cpu_options& opts);

// One compiler run per program: passes run module by module, sub-modules first and the
// main module ("main") last, so the kernels of sub-modules (control-flow bodies) wait in
// `pending` and go into the main module's translation unit; their carriers then hold the
// same library. A module lowered on its own under another name keeps its source, and
// finalize compiles it (through the cache) if nothing else did.
struct lowering {
    // The cpu context's options (it outlives the passes): fast_math, the kernels' ISA
    // level, the compiler and the cache.
    const cpu_options* options = nullptr;
    struct batch;
    static std::shared_ptr<batch> make_batch();
    std::shared_ptr<batch> pending = make_batch();
    std::string name() const { return "cpu::codegen"; }
    void apply(module& m) const;
};


// The elementwise instructions cpu::lowering takes after the convolution or matrix
// product before them (as post-ops, or SiLU as cpu::silu): from each such anchor, the
// chain cpu::find_post_ops (src/targets/cpu/fusion.cpp) finds; what it keeps out of
// fusion and the lowering then declines still runs, as single kernels. With `options`, a
// generic program's attentions' scale and mask add too (generic_attentions).
std::unordered_set<const instruction*> post_op_chains(module& m, const cpu_options* options = nullptr);

}  // namespace kiln::cpu::codegen
