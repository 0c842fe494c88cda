// Deformable convolution (ONNX DeformConv) and the stateful causal depthwise
// convolution of recurrent-style models (ONNX CausalConvWithState, opset 27).
#pragma once
#include "ops/nn_conv.hpp"

namespace kiln::op {

// Inputs (x, w, offset[, bias][, mask]). Each kernel tap of each output position samples
// x at its regular position plus a learned offset (offset: N, offset_group * K * r, out...,
// the r coordinates of each tap interleaved), by multilinear interpolation with zeros
// outside, scaled by mask (N, offset_group * K, out...) when given.
struct deformable_convolution : conv_attributes {
    std::int64_t offset_group = 1;
    bool has_bias = false;
    bool has_mask = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        conv_attributes::reflect(self, f);
        f(self.offset_group, "offset_group");
        f(self.has_bias, "has_bias");
        f(self.has_mask, "has_mask");
    }
    std::string name() const { return "deformable_convolution"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (input (B, C, L), weight (C, 1, K)[, bias (C)][, past_state (B, C, K-1)]).
// Returns the tuple (output (B, C, L), present_state (B, C, K-1)): the input is prefixed
// with past_state (zeros when absent), convolved per channel, biased, rounded to the
// element type and, with silu, passed through x * sigmoid(x); present_state is the last
// K-1 positions of the prefixed input.
struct causal_conv_with_state {
    bool silu = false;
    bool has_bias = false;
    bool has_past_state = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.silu, "silu");
        f(self.has_bias, "has_bias");
        f(self.has_past_state, "has_past_state");
    }
    std::string name() const { return "causal_conv_with_state"; }
    // A tuple result: dynamic input dims are inferred here (the generic inference only
    // handles tensors).
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
