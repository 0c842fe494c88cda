// cpu::channel_affine: y = x * a[c] + b[c] per channel, optionally max(y, 0), where x is
// one float32 NCHW activation or the concatenation along channels of several: an
// inference BatchNormalization (a = scale / sqrt(var + eps), b = bias - mean * a, made at
// compile time) with the Relu after it and the Concat before it, in one pass.
//
// Why: DenseNet's layers are pre-activation (concat -> BN -> ReLU -> 1x1 convolution),
// so the BN cannot fold into a convolution's weights. On oneDNN 2.6 that was three passes
// over the growing concatenation: its concat of channels-last parts (the `ref:any`
// implementation, the slowest of the three), its batch normalization, and its ReLU
// (DenseNet-121 at batch 1 on a Zen 5 EPYC, 2 threads: 59 concats, 62 BNs and 62 ReLUs,
// 13.4 ms of a 38.8 ms run). Here each part is read once, at its place in the result.
//
// Layouts: every part, and the result, is "pixel channels" with a group g: element
// (n, c, pixel p) at n * image + (c / g) * block + p * g + c % g. That covers oneDNN's
// blocked nChw8c / nChw16c (g = 8, 16), channels-last (g = C) and plain NCHW (g = 1,
// block = H * W), so parts in different layouts mix. The result takes the kind of the
// first part in a oneDNN layout (plain NCHW when none is); channels padded to the block
// are written as zeros, as oneDNN's own kernels leave them.
//
// Inputs: (part..., a, b, output buffer). KILN_CPU_CHANNEL_AFFINE=dnnl keeps oneDNN's
// concat, batch normalization and eltwise.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct channel_affine {
    std::vector<md_record> parts;  // each part's layout; empty: plain (row-major NCHW)
    md_record layout;              // the result's; empty: plain
    bool relu = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.parts, "parts");
        f(self.layout, "layout");
        f(self.relu, "relu");
    }
    std::string name() const { return "cpu::channel_affine"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// The selection table's three entry points (selection.cpp). A chain is a
// batch_norm_inference with constant parameters over a 4-D float32 x, x possibly a concat
// along channels that nothing else reads, and possibly a relu that alone reads the BN.
// It is lowered at its last instruction; the ones before it wait (return true, changing
// nothing), which they know from the parts' layouts alone, already fixed when the concat
// is reached.
bool concat_waits_for_channel_affine(lower_env& env, instruction_ref concat);
// A BN with a relu after it waits; one after a concat is lowered here (one without
// either stays on oneDNN's batch normalization: nothing to save).
bool lower_channel_affine_bn(lower_env& env, instruction_ref bn);
bool lower_channel_affine_relu(lower_env& env, instruction_ref relu);

}  // namespace kiln::cpu
