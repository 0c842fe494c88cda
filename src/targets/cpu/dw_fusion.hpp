// Depthwise fusion: a 1x1 convolution whose (activated) result feeds only a depthwise
// 3x3 convolution (stride 1 or 2, padding 1) runs as one oneDNN primitive with the
// depthwise convolution as a post-op, so the expanded tensor of an inverted residual
// block (MobileNetV2, EfficientNet) is never written to memory as a whole.
//
// oneDNN 2.6 takes the fusion on AVX2 only when the 1x1 result is larger than twice
// the L2 cache of the threads (smaller ones fall back to its "ref_fused" driver, which
// runs the two kernels one after the other through a buffer and gains nothing): the
// plan is kept only when the fused primitive is the jit 1x1 kernel itself.
// KILN_CPU_DW_FUSION=0 turns it off (A/B comparisons).
#pragma once
#include "targets/cpu/anchor_plan.hpp"
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"

#include <optional>

namespace kiln::cpu {


// The plan of `first` (a 1x1 convolution) with `second` (the depthwise convolution
// reading its result) as a depthwise post-op, when the pair qualifies and oneDNN runs
// it as one jit kernel.
std::optional<anchor_plan> fuse_depthwise(lower_env& env, const anchor_plan& first, const anchor_plan& second);

// Stores the plan's depthwise weights in the layout the fused primitive wants (a
// literal before `pos`); op records it.
void relayout_dw_weights(lower_env& env, anchor_plan& p, convolution& op, instruction_ref pos);

}  // namespace kiln::cpu
