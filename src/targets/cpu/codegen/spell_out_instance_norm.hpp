// spell_out_instance_norm (before the fusion pass): InstanceNormalization over float32 as
// the ops that compute it (the mean over each channel's positions, the centred values, their
// mean square plus epsilon, its square root, the division), then the per-channel scale and
// bias where they are not ones and zeros. The fusion pass makes the chain one generated
// reduction kernel (with the elementwise work after it: the scale, a GELU), in static and
// generic programs alike.
//
// Why: instance_norm had no cpu kernel and ran the reference one (double-precision loops).
// PyTorch exports every GroupNorm as one (reshaped to [N, groups, -1], scale ones, bias
// zeros, the real affine after it): wav2vec2's and HuBERT's feature extractors (512
// channels of 6399 positions for 2 s of audio), Conv-TasNet's global layer norm.
#pragma once
#include <kiln/module.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu::codegen {

// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + epsilon) over `axes` (kept), inserted before
// `pos`: the normalization instance and layer norms share (spell_out_generic_norms too).
instruction_ref insert_normalization(module& m, instruction_ref pos, instruction_ref x, std::vector<std::int64_t> axes,
                                     float epsilon);

struct spell_out_instance_norm {
    std::string name() const { return "cpu::spell_out_instance_norm"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu::codegen
