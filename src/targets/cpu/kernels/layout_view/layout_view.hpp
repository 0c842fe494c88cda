// cpu::layout_view: a plain (row-major) value seen, without a copy, under a oneDNN layout
// that holds the same bytes but writes other strides for dims of length 1. oneDNN calls the
// two descriptions equal, yet its kernels choose by the exact strides: a 1-channel NCHW image
// is not `nhwc` to the brgemm convolutions, which then fall back to the reference kernel.
// Before this view the value was copied (a grayscale network's input: fashion_resnet's
// 16 x 28 x 28 batch, 8-21 us a run; a spectrogram fed as a 1-channel image, more).
//
// Inputs: (x), plain. The result aliases x; the lowering records `layout` as its layout.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

struct layout_view {
    md_record layout;  // the result's: the same bytes as x's row-major layout

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.layout, "layout");
    }
    std::string name() const { return "cpu::layout_view"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// A layout_view of plain x as `want` where the two describe the same bytes (oneDNN's
// equality of descriptions: they differ only in the strides of dims of length 1); nothing
// otherwise.
std::optional<instruction_ref> lower_layout_view(lower_env& env, instruction_ref pos, instruction_ref x,
                                                 const dnnl::memory::desc& want);

}  // namespace kiln::cpu
