// cpu::convolution: an IR convolution or deconvolution (`op`, whose attributes give the
// geometry) on oneDNN, with fused post-ops.
//
// Operands: (x, w[, b], post-op inputs...). When `weights` is set, w is a constant blob
// already laid out the way the primitive wanted it at compile time (weights_shape is
// its logical IR shape); if the primitive on this CPU wants another layout, finalize
// relays it out once. When `weights` is empty, w is a plain IR tensor (run-time weights).
#pragma once
#include "targets/cpu/dnnl_op.hpp"
#include "targets/cpu/post_ops.hpp"

#include <kiln/operation.hpp>

namespace kiln::cpu {

struct convolution : dnnl_op<convolution> {
    operation op;  // op::convolution or op::deconvolution
    shape weights_shape;
    md_record weights;
    bool has_bias = false;
    std::vector<post_op> post_ops;
    std::string impl;  // oneDNN implementation to prefer (empty: oneDNN's first choice)

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.weights_shape, "weights_shape");
        f(self.weights, "weights");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
        f(self.impl, "impl");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::convolution"; }
    bool transposed() const { return op.name() == "deconvolution"; }

    shape logical_shape(const std::vector<shape>& operands) const;
    // With `any_weights`, oneDNN picks the weights layout (what compile time does);
    // otherwise the weights are plain, in the IR layout.
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands, const shape& dst,
                                      bool any_weights) const;
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                      const shape& dst) const {
        return make_pd(eng, operands, dst, !weights.empty());
    }
    // The IR weights (weights_shape, any strides) as oneDNN sees them: groups split out.
    dnnl::memory::desc weights_md(bool any) const;
    void bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                       const std::vector<argument>& constants, const dnnl::engine& eng) const;
};

// The record of the plain (IR) layout of a cpu::convolution's weights: what a CPU whose
// kernels want plain weights would have stored (tests of the load-time relayout).
md_record plain_weights_record(const operation& conv);

}  // namespace kiln::cpu
