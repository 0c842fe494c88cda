// cpu::convolution: an IR convolution or deconvolution (`op`, whose attributes give the
// geometry) on oneDNN, with fused post-ops.
//
// Operands: (x, w[, b], post-op inputs...). When `weights` is set, w is a constant blob
// already laid out the way the primitive wanted it at compile time (weights_shape is
// its logical IR shape); if the primitive on this CPU wants another layout, finalize
// relays it out once. When `weights` is empty, w is a plain IR tensor (run-time weights).
//
// With `dw` set (a 1x1 convolution followed by a depthwise one, oneDNN's depthwise
// post-op) the operands are (x, w[, b], dw_w[, dw_b]) and the result is the depthwise
// convolution's: the 1x1 result is never written to memory as a whole.
#pragma once
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/dnnl_op.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include <kiln/operation.hpp>

namespace kiln::cpu {

// A depthwise kxk convolution (pad `pad` at the start of each spatial dim, stride
// `stride`, output ceil(in / stride)) run inside the 1x1 convolution before it.
struct depthwise_post_op {
    std::int64_t kernel = 0;  // 0: none
    std::int64_t stride = 1;
    std::int64_t pad = 1;
    shape weights_shape;  // IR [C, 1, k, k]
    md_record weights;    // the stored (pre-laid-out) weights
    bool has_bias = false;
    std::vector<post_op> post_ops;  // eltwise only, after the depthwise convolution

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.kernel, "kernel");
        f(self.stride, "stride");
        f(self.pad, "pad");
        f(self.weights_shape, "weights_shape");
        f(self.weights, "weights");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
    }
    bool active() const { return kernel > 0; }
    // The plain (IR) layout of the weights as oneDNN sees them: [C, 1, 1, k, k].
    dnnl::memory::desc plain_md() const;
};

struct convolution : dnnl_op<convolution> {
    static constexpr bool work_per_element = false;  // a product: the result hides its depth
    // Under single_thread_macs multiply-adds (no fused depthwise): the calling thread alone.
    // EfficientNet's squeeze-and-excitation convolutions (1x1 on [1, C, 1, 1]) took 15-25 us
    // each on two threads and ~10 on one (all 32: 0.754 against 0.343 ms, Zen 5).
    bool small_work(const std::vector<shape>& operands, const shape& out) const;
    operation op;  // op::convolution or op::deconvolution
    shape weights_shape;
    md_record weights;
    bool has_bias = false;
    std::vector<post_op> post_ops;
    std::string impl;  // oneDNN implementation to prefer (empty: oneDNN's first choice)
    depthwise_post_op dw;
    // bf16 source and weights, float32 accumulation (a --bf16 program on a CPU with native
    // bf16, widen_reduced.hpp): a float32 x in the planned layout is converted as the kernel
    // runs, a bf16 x (another bf16 convolution's result) read as it is; constant weights are
    // stored in bf16. The result is float32 unless dst_layout's data type is bf16
    // (bf16_activations.hpp). Not with `dw`.
    bool bf16 = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.bf16, "bf16");
        f(self.weights_shape, "weights_shape");
        f(self.weights, "weights");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
        f(self.impl, "impl");
        f(self.dw, "dw");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::convolution"; }
    // The wrapped op is a deconvolution (a transposed convolution).
    bool transposed() const;
    // Operand index of the depthwise weights (its bias follows).
    std::size_t dw_operand() const { return 2 + (has_bias ? 1 : 0); }
    // Operand index of the first post-op input.
    std::size_t extra_operand() const { return dw_operand() + (dw.active() ? 1 + (dw.has_bias ? 1 : 0) : 0); }

    shape logical_shape(const std::vector<shape>& operands) const;
    // With `any_weights`, oneDNN picks the weights layout (what compile time does);
    // otherwise the weights are plain, in the IR layout.
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands, const shape& dst,
                                      bool any_weights) const;
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                      const shape& dst) const {
        return make_pd(eng, operands, dst, !weights.empty());
    }
    // Whether the primitive computes in bf16: asked for, constant weights, no depthwise post-op.
    // Loaded on a CPU without native bf16 (has_native_bf16): float32, the bf16 weights
    // reordered to float32 once (exactly), so a saved bf16 program runs anywhere.
    bool in_bf16(bool any_weights) const { return bf16 && any_weights && !dw.active() && has_native_bf16(); }
    // The result is bf16 in dst_layout (bf16_activations.hpp). Where the kernel computes in
    // float32 (no native bf16), it converts its result into that layout as it runs.
    bool bf16_result() const { return !dst_layout.empty() && dst_layout.data_type == dnnl_bf16; }
    // The IR weights (weights_shape, any strides) as oneDNN sees them: groups split out.
    dnnl::memory::desc weights_md(bool any) const;
    void bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                       const std::vector<argument>& constants, const dnnl::engine& eng) const;
};

// The record of the plain (IR) layout of a cpu::convolution's weights: what a CPU whose
// kernels want plain weights would have stored (tests of the load-time relayout).
md_record plain_weights_record(const operation& conv);

}  // namespace kiln::cpu
