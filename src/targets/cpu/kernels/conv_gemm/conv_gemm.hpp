// cpu::conv_gemm: a 2-D convolution with few output pixels (all images: ResNet-50's 3x3 layers
// at 14x14 and 7x7) as one matrix product on Kiln's packed-GEMM kernels (packed_gemm.hpp):
// the input's windows gathered into rows (im2col: one row per output pixel, K = kh kw C
// values), times the weights packed at compile time into 16-column panels, with the bias
// and post-ops applied in the epilogue and the result stored straight into oneDNN's
// channel-blocked layout (the one the neighbouring convolutions use).
//
// Why: there the product has few rows and 2.4-9.4 MB of weights; oneDNN 2.6's direct AVX2
// kernels take ~2.4 ms for ResNet-50's 512-channel 3x3 at 7x7 where ONNX Runtime takes
// ~1.8 ms, and Winograd does not pay with 4 tiles. The packed panels stream the weights
// once, each thread its own, at near the FMA peak.
//
// On AVX-512 machines oneDNN 2.6 runs brgemm convolutions on channels-last activations that
// beat these products where the data stays in the caches (Zen 5 EPYC, resnet50 at batch 1,
// 2 threads: the 256-channel 3x3 at 14x14 0.47 ms against 0.67 here; 512 at 7x7 0.65-0.70
// against 0.77; 1x1 layers 0.23-0.28 against 0.30-0.35). There conv_gemm takes only 1x1
// stride-1 layers over many pixels (x read in place as A, the kernels' tall order: row
// tiles finished one by one, the next tile's A and C prefetched) whose x, result and
// residual come to 8 MiB or more, with K <= 256 or a residual: resnet50 at batch 8, per
// layer against oneDNN (whose in-place sum reads the residual slowly), 64->256 at 56x56
// with the residual 2.1 vs 3.1-3.6 ms, 128->512 at 28x28 1.9 vs 2.5-2.6, 256->1024 at
// 14x14 2.0 vs 2.2, 256->64 at 56x56 1.4 vs 1.7; deeper layers without a residual lose
// (1024->256 1.9 vs 1.8, 1024->512 3.8 vs 3.5); at batch 1 all lose (64->256 at 56x56
// 0.34 vs 0.25).
//
// Strided 1x1 layers (ResNet's downsampling projections) with few output pixels (<= 512
// rows) run here on AVX-512 too, their rows gathered: resnet50 at batch 1, per layer,
// 512->1024 at 14x14 0.51 vs 0.60 ms on oneDNN, 1024->2048 at 7x7 0.58 vs 0.64 (5
// alternating runs); with 784 rows (256->512 at 28x28) oneDNN is faster (0.55 vs 0.58).
// KILN_CPU_CONV_GEMM_STRIDED=0 keeps them on oneDNN.
//
// A residual added first is added in place (sum_post_op.hpp): the result's buffer is the
// residual's, and the product starts from its values (pgemm::args::accumulate).
//
// Inputs: (x, packed weights, [bias], post-op inputs..., im2col buffer, output buffer).
// Used on CPUs with AVX2 and FMA (baseline kernels when a saved program loads elsewhere).
// KILN_CPU_CONV_GEMM=0 keeps these convolutions on oneDNN; =all also takes the few-pixel
// ones on AVX-512 machines; =1x1 also takes 1x1 convolutions with few pixels (a
// channels-last x with stride 1 is read in place as A); =tall takes every 1x1 over many
// pixels on AVX-512 machines, whatever its size and depth. All are for tests and measurements.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct conv_gemm {
    std::vector<std::int64_t> kernel;     // kh, kw
    std::vector<std::int64_t> stride;     // sh, sw
    std::vector<std::int64_t> dilation;   // dh, dw
    std::vector<std::int64_t> pad_begin;  // top, left
    std::int64_t in_channels = 0, out_channels = 0;
    bool has_bias = false;
    // Binary inputs: in the result's layout, or one value per channel. A leading "sum": the
    // output buffer holds a residual the product adds to in place (sum_post_op.hpp).
    std::vector<post_op> post_ops;
    std::vector<md_record> layouts;  // per input: its oneDNN layout (x's is blocked)
    md_record dst_layout;            // the result's (x's blocking)
    // > 0: the gathered rows of A this many floats apart instead of K (K a multiple of 1024
    // puts them 4 KiB apart, where a register tile's 12 rows share one L1 cache set).
    std::int64_t a_stride = 0;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.kernel, "kernel");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.pad_begin, "pad_begin");
        f(self.in_channels, "in_channels");
        f(self.out_channels, "out_channels");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
        f(self.a_stride, "a_stride");
    }
    std::string name() const { return "cpu::conv_gemm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }

    struct plan;
    std::shared_ptr<const plan> ready;  // built by finalize, not an attribute
};

// Replaces `pos` by a conv_gemm computing convolution `c` (planned by the lowering: bias,
// post-ops, layouts) over `operands` (x, the IR weights literal, [bias], post-op inputs),
// when the geometry, layouts and post-ops suit it; false, changing nothing, otherwise.
// `replaced`: the instructions the op replaces (sum_post_op.hpp: a residual it may write into).
// `rules` false: whenever it can (the tuner measures it), not only where the rules above
// choose it.
bool lower_conv_gemm(lower_env& env, const convolution& c, const std::vector<instruction_ref>& operands,
                     instruction_ref pos, const std::vector<instruction_ref>& replaced, bool rules = true);

}  // namespace kiln::cpu
