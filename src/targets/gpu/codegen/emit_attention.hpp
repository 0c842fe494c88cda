// CUDA C++ for fused attention: a gpu::fused_kernel whose body is the matched chain
// (passes/attention_match.hpp) with its own ops, so the reference compute of the kernel is
// exactly what the unfused program computed:
//
//   inputs q [B.., Sq, D], kt [B.., D, Sk], v [B.., Sk, Dv], [mask broadcasting to
//   [B.., Sq, Sk]]; nodes matmul(q, kt), [fused_literal c, mul or div by c], [add mask |
//   fused_literal fill, where(mask, scores, fill) or where(mask, fill, scores)], softmax
//   (last axis), matmul(., v). An added mask is float32, a select's bool.
//
// The kernel (flash-attention style, float throughout): a block of 8 warps takes R query
// rows per warp (8R rows of one batch index) and streams over the keys in tiles of 32,
// K and V staged in shared memory (every tensor read at its own constant strides: views
// need no copy). Lane j scores key j of the tile for each of its warp's rows; the warp's
// running max and sum are updated (the old sum and accumulators scaled by exp(old max -
// new max)), the probabilities go through shared memory, and each lane accumulates its
// output columns (lane, lane + 32, ...). At the end the accumulators are divided by the
// sum. A key-less row (every score -inf) gives 0/0 = NaN, as the reference's softmax does.
#pragma once
#include "ops/fused.hpp"

#include <kiln/shape.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kiln::gpu::codegen {

// What an attention body holds besides the three products' inputs.
struct attention_form {
    bool mask = false;        // input 3 added to the scaled scores (or, with select, choosing them)
    bool mask_first = false;  // add(mask, scores) rather than add(scores, mask)
    bool select = false;      // where(mask, scores, fill): the scores where the mask is true, else fill
    bool fill_when_true = false;  // where(mask, fill, scores)
    float fill = 0.0f;
    enum { none, multiply, divide } scaling = none;
    bool scale_first = false;  // mul(c, scores)
    float c = 1.0f;            // the scale's literal
};

// The form of `body` when it is an attention body (layout above), else nothing.
std::optional<attention_form> attention_form_of(const op::fused& body);

// Why the generator cannot write this attention (float32 static operands with the same
// batch dims, D and Dv of at most 128 so the shared tiles fit), or "".
std::string attention_problem(const op::fused& body, const std::vector<shape>& inputs);

// One kernel named `name`; the output buffer is standard [B.., Sq, Dv].
std::string emit_attention_kernel(const op::fused& body, const std::vector<shape>& inputs, const std::string& name);
// The kernel's symbol, derived from its source like kernel_symbol's.
std::string attention_symbol(const op::fused& body, const std::vector<shape>& inputs);
// Blocks to launch: one per (batch index, block of query rows), at most 65535 * 8; the
// kernel's loop over tiles covers the rest.
unsigned attention_grid(const op::fused& body, const std::vector<shape>& inputs);

}  // namespace kiln::gpu::codegen
