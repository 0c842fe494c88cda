// Finds the elementwise work after a convolution or matrix product that oneDNN can do
// as post-ops of that primitive: activations (also SiLU spelled x * sigmoid(x) and the
// exported erf GELU x * (1 + erf(x / sqrt 2)) * 0.5), scaling by constants, bias and
// residual adds. As in ONNX Runtime, an intermediate result is fused away only when it
// has a single user and is not a program output.
#pragma once
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include <kiln/module.hpp>

#include <optional>
#include <unordered_set>
#include <vector>

namespace kiln::cpu {

struct fused_chain {
    // The instructions absorbed, in order; the fused op takes the place of the last.
    std::vector<instruction_ref> members;
    // Binary post-ops refer to `extra` by index (post_op::input), to be renumbered once
    // the operand list of the fused op is known.
    std::vector<post_op> post_ops;
    std::vector<instruction_ref> extra;
    // A constant add that becomes the primitive's bias (the first post-op only, and
    // only when the anchor has none): the instruction holding the per-channel values.
    std::optional<instruction_ref> bias;
    // Where each matched step ends: the lowering shortens the chain, step by step,
    // when the primitive cannot take all of it (or would fall back to slow code).
    struct mark {
        std::size_t members = 0, post_ops = 0, extra = 0;
        bool bias = false;
    };
    std::vector<mark> steps;
};

// `channel_axis`: the output dim a per-channel bias runs along (1 for convolution, the
// last for matmul); `can_take_bias`: the anchor has no bias yet. Instructions in
// `claimed` (fused into an earlier anchor) end the chain.
// `own_silu`: a SiLU on a result of at least silu_min_elements values ends the chain
// (cpu::silu computes it faster than oneDNN's post-op, see silu.hpp).
// A dynamic anchor (a generic program's matmul, for cpu::dyn_matmul's packed epilogue):
// its channels fixed, every other varying dim named; each step keeps the anchor's dims,
// and a binary operand has them too or is one value per channel.
fused_chain find_post_ops(instruction_ref anchor, std::size_t channel_axis, bool can_take_bias,
                          const std::unordered_set<const instruction*>& claimed, bool own_silu = false);

// The chain cut to its first `prefix` steps.
fused_chain truncate(const fused_chain& c, std::size_t prefix);

// Rewrites layer normalization spelled out over the last axis (as opset < 17 exporters
// write it: ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, Div[, Mul scale][, Add
// bias]) into one IR layer_norm, which the lowering then maps to oneDNN. Returns the
// number of patterns folded.
std::size_t fold_layer_norm_patterns(module& m);

}  // namespace kiln::cpu
