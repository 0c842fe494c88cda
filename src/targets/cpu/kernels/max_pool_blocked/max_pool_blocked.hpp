// cpu::max_pool_blocked: windowed 2-D max pooling of a float32 NCHW tensor held in
// oneDNN's blocked activation layout (aBcd8b / aBcd16b) or channels-last (acdb), written in
// the same layout.
//
// Why not oneDNN: its 2.6 jit:avx2 pooling takes ~0.45 ms for ResNet-50's 3x3 stride-2
// pool of 64x112x112 on 2 threads where ONNX Runtime's takes ~0.13 ms. This loop is one
// vector max per window tap (the channel block being the vector), in plain C++ compiled
// twice (AVX2 and baseline) and chosen by the loader (target_clones), so a saved program
// runs on any x86-64.
//
// Inputs: (x, output buffer). Padding taps are skipped (max ignores them, as ONNX says).
// Used for blocked layouts; channels-last ones only with KILN_CPU_MAX_POOL=all (oneDNN's
// pooling is faster there); KILN_CPU_MAX_POOL=dnnl leaves every max pool to oneDNN.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <vector>

namespace kiln::cpu {

struct max_pool_blocked {
    std::vector<std::int64_t> kernel;     // kh, kw
    std::vector<std::int64_t> stride;     // sh, sw
    std::vector<std::int64_t> dilation;   // dh, dw
    std::vector<std::int64_t> pad_begin;  // top, left
    md_record layout;                     // x
    md_record dst_layout;                 // the result (same blocking)

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.kernel, "kernel");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.pad_begin, "pad_begin");
        f(self.layout, "layout");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::max_pool_blocked"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 1; }
};

// Replaces pooling instruction `ins` (max, 2-D, x in a blocked layout) by a
// max_pool_blocked; false, changing nothing, when it does not apply.
bool lower_max_pool_blocked(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
