// cpu::global_avg_pool: the mean over all pixels of each channel of a float32 4-D
// activation in a layout that stores its channels per pixel (pixel_channels: oneDNN's
// blocked nChw8c / nChw16c, or channels-last), the [N, C, 1, 1] result in the same kind of
// layout (which for one pixel is [N][C padded] in memory): squeeze-and-excitation's
// squeeze (EfficientNet-B0 has 16 of them) and the classifier's pooling. Also an x that is
// channels-last in its IR strides (int8 networks' float results), its result row-major.
//
// Why not oneDNN: its 2.6 pooling takes 7-9 us for EfficientNet-B0's 672x14x14 on a Zen 5
// EPYC, 2 threads, where reading the 0.5 MB from L2 takes about 2. Here each task sums a
// chunk of up to 64 channels over the pixels in vector registers (a loop compiled for
// AVX-512, AVX2 and the baseline, picked by the loader: target_clones).
//
// Inputs: (x, output buffer). KILN_CPU_GLOBAL_POOL=dnnl keeps oneDNN's pooling.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct global_avg_pool {
    md_record layout;      // x's (its geometry; the element type is x_type)
    md_record dst_layout;  // the result's: x's kind of layout, 1x1 pixels
    // x's element type: float32, or uint8 / int8 levels dequantized on the way, the mean of
    // (q - zero_point) * scale computed as (sum q - pixels zero_point) * scale / pixels (a
    // DequantizeLinear that only this pooling read: QDQ models' classifier pooling).
    type x_type = type::float32;
    float scale = 1.0f;
    std::int64_t zero_point = 0;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.layout, "layout");
        f(self.dst_layout, "dst_layout");
        f(self.x_type, "x_type");
        f(self.scale, "scale");
        f(self.zero_point, "zero_point");
    }
    std::string name() const { return "cpu::global_avg_pool"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// Replaces `ins` (an average pooling over all of each image, no padding, of an x in a
// pixel-channels layout) by a cpu::global_avg_pool; false, changing nothing, otherwise.
bool lower_global_avg_pool(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
