// cpu::pixel_rows_view: a channels-last activation [N, C, H, W] seen, without a copy, as
// the row-major sequence [N, H * W, C] (one row of C channels per pixel): what a vision
// transformer's patch embedding asks for with Conv -> Reshape/Flatten to [N, C, H * W] ->
// Transpose(0, 2, 1). Without it the activation is first reordered to NCHW for the reshape
// and the transposed view is then copied back pixel by pixel by its reader (vit_tiny: 31 us
// for the reorder, 33 for the concat with the class token reading the strided view).
//
// Inputs: (x), x in the channels-last layout recorded in `layout`. The result aliases x.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <string>
#include <vector>

namespace kiln::cpu {

struct pixel_rows_view {
    md_record layout;  // x's: channels-last, dense

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.layout, "layout");
    }
    std::string name() const { return "cpu::pixel_rows_view"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// Replaces `ins`, a transpose(perm 0 2 1) of a reshape or flatten to [N, C, H * W] of a
// channels-last activation, by a cpu::pixel_rows_view of the activation; false, changing
// nothing, otherwise. Called in program order, once the activation's layout is known and
// before its readers are lowered (they then see a row-major input).
bool lower_pixel_rows_view(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
