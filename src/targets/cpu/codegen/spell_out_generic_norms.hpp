// spell_out_generic_norms (before the fusion pass): a generic program's batch normalization
// and layer normalization over float32 as the ops that compute them, for the fusion pass to
// make generated kernels over run-time sizes (generic_layout.hpp) of:
//   batch_norm_inference  x * a + b, per channel, a = scale / sqrt(var + epsilon) and
//                         b = bias - mean * a folded here from the constant statistics;
//   layer_norm            the mean over the normalized axes, the centred values, their mean
//                         square plus epsilon, its square root, the division, then scale and
//                         bias (constants) where they are not ones and zeros.
//
// Why: the cpu target's kernels for both (oneDNN's primitives, the fused layer norm, the
// convolution's folded affine) are made for one shape, and a generic program ran the
// reference kernels (double-precision loops): torchvision's densenet121 (its batch norms
// come after concatenations, where no convolution takes them) 176 ms a call against 39 ms
// for its static program, maxvit_t 136 against 45, swin_t 73 against 33. Static programs
// keep both ops as they are.
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln::cpu::codegen {

struct spell_out_generic_norms {
    std::string name() const { return "cpu::spell_out_generic_norms"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu::codegen
