// A residual add fused into a oneDNN convolution as the in-place `sum` post-op instead of
// a `binary add`: the convolution writes into the residual's own buffer, which already
// holds the values to add, so the primitive reads no second tensor. cpu::conv_gemm takes
// the same rewrite (residual_for_sum) and accumulates into the buffer.
//
// Why: oneDNN 2.6's brgemm convolutions (its choice on AVX-512 machines, channels-last)
// apply a full-tensor binary add slowly; ResNet-50 at batch 8 on a Zen 5 EPYC, 2 threads:
// its 64->256-channel 1x1 at 56x56 with the residual 5.9 ms against ONNX Runtime's 3.1
// (docs/performance.md has the measurements with and without).
//
// Taken only where it cannot be seen: the residual is a cpu op's result in its own
// planned buffer (not a parameter, a literal, a view or a returned value), in the
// result's layout and big enough, read by nothing after the convolution, and oneDNN
// builds the fused kernel without falling back to its reference code. The planner
// then sees the convolution's result as that buffer (output_alias: the last input).
// KILN_CPU_SUM_POST_OP=0 keeps the binary add.
#pragma once
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"

#include <kiln/instruction.hpp>

#include <functional>
#include <optional>
#include <vector>

namespace kiln::cpu {

// The general form, for any op with post-ops: the first binary add of `post_ops` whose
// operand (among `operands`) can be the result's buffer (the conditions above, the result
// laid out as `dst_layout`) and that `accept(index)` takes is rewritten into a "sum"; its
// operand is dropped from `operands` (later binary inputs renumbered) and returned.
std::optional<instruction_ref> residual_for_sum(lower_env& env, std::vector<post_op>& post_ops,
                                                std::vector<instruction_ref>& operands, const md_record& dst_layout,
                                                instruction_ref pos, const std::vector<instruction_ref>& replaced,
                                                const std::function<bool(std::size_t)>& accept);

// The half of residual_for_sum's conditions that depends on the rest of the module: r
// owns a planned buffer and nothing reads r after `pos` (but `replaced`). The tuner asks
// it to give its trial the residual the real program would have.
bool may_write_into(lower_env& env, instruction_ref r, instruction_ref pos, const std::vector<instruction_ref>& replaced);

// Rewrites the first fitting binary add of `op` (planned over `operands`, to replace
// `pos`) into a sum: drops the residual from `operands` and returns it, to be the output
// buffer; nothing (changing nothing) when none fits.
std::optional<instruction_ref> sum_into_residual(lower_env& env, convolution& op, std::vector<instruction_ref>& operands,
                                                 const shape& dst, instruction_ref pos,
                                                 const std::vector<instruction_ref>& replaced);

}  // namespace kiln::cpu
