// cpu::channel_mul: x * s for a float32 4-D activation x (NCHW logically) in a layout that
// stores its channels per pixel (pixel_channels: oneDNN's blocked nChw8c / nChw16c, or
// channels-last) and s one value per image and channel ([N or 1, C, 1, 1], dense), the
// result in x's layout: squeeze-and-excitation's rescaling (EfficientNet).
//
// Why not oneDNN: its 2.6 binary primitive broadcasting s over a channels-last x is slow
// (EfficientNet-B0's 32x112x112 on a Zen 5 EPYC, 2 threads: 0.085 ms, where cpu::silu over
// the same tensor, far more arithmetic, takes 0.034). Here each pixel's channel group is
// multiplied by the matching slice of s, a vector loop compiled for AVX-512, AVX2 and the
// baseline and picked by the loader (target_clones).
//
// Inputs: (x, s, output buffer), or (x, s) to scale x in place when x's buffer is a
// kernel's own and nothing else reads it (EfficientNet's SiLU result after its squeeze: the
// values are overwritten while in cache, and no fresh buffer is written).
// KILN_CPU_CHANNEL_MUL=dnnl keeps oneDNN's binary.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct channel_mul {
    md_record layout;          // x's (and the result's) layout
    bool s_per_image = false;  // s holds a row per image (else one, the same for every image)
    std::int64_t s_stride = 0;  // values per row of s: C, or C padded to s's own channel block
    bool in_place = false;      // the result overwrites x (no output buffer)

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.layout, "layout");
        f(self.s_per_image, "s_per_image");
        f(self.s_stride, "s_stride");
        f(self.in_place, "in_place");
    }
    std::string name() const { return "cpu::channel_mul"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return in_place ? 0 : static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// Replaces `ins` (a mul of x, in a pixel-channels layout, by a per-channel s) by a
// cpu::channel_mul; false, changing nothing, when it does not apply.
bool lower_channel_mul(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
