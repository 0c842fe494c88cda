// cpu::nchw_to_pixel_channels: copies a row-major NCHW float32 image batch with few
// channels (1-4: the RGB input of every vision model) into a layout that stores its
// channels per pixel (channels-last, or one channel block of oneDNN's nChw8c/nChw16c, the
// padding channels zero), the layout the first convolution reads.
//
// Why not oneDNN: its 2.6 reorder nchw -> nhwc of a 3x224x224 image runs its generic
// jit:uni kernel at 25-56 us on a Zen 5 EPYC (2 threads); interleaving 3 streams of
// pixels with vector permutes takes about 7. ONNX Runtime's first convolution reads
// NCHW itself, so this copy is time it does not spend.
//
// Inputs: (x, output buffer). KILN_CPU_INPUT_REORDER=dnnl keeps oneDNN's reorder.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

struct nchw_to_pixel_channels {
    md_record dst_layout;  // the result's

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::nchw_to_pixel_channels"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// x (a plain value) copied into `want` before `pos` by a cpu::nchw_to_pixel_channels when
// x is a row-major float32 NCHW tensor of 1-4 channels and `want` a pixel-channels layout
// of one channel block; nullopt, changing nothing, otherwise.
std::optional<instruction_ref> lower_nchw_to_pixel_channels(lower_env& env, instruction_ref pos, instruction_ref x,
                                                            const dnnl::memory::desc& want);

}  // namespace kiln::cpu
