// cpu::matmul: a batched matrix product on oneDNN (IR matmul, and gemm's op(a) op(b)),
// with an optional bias row and fused post-ops (gemm's alpha and beta*C, activations,
// residual adds).
//
// Operands: (a, b[, bias], post-op inputs...), each of rank >= 2; batch dims broadcast
// (NumPy rules). trans_a / trans_b swap the last two dims of a / b (by strides: no
// copy). When `weights` is set, b is a constant blob in the layout the primitive chose
// at compile time (weights_shape is its logical shape: row-major with padded rows, see
// weights_md); see cpu::convolution for how another CPU's layout is handled.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_op.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

namespace kiln::cpu {

struct matmul : dnnl_op<matmul> {
    static constexpr bool work_per_element = false;  // a product: the result hides its depth
    bool trans_a = false;
    bool trans_b = false;
    bool has_bias = false;
    shape weights_shape;
    md_record weights;
    std::vector<post_op> post_ops;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.trans_a, "trans_a");
        f(self.trans_b, "trans_b");
        f(self.has_bias, "has_bias");
        f(self.weights_shape, "weights_shape");
        f(self.weights, "weights");
        f(self.post_ops, "post_ops");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::matmul"; }

    shape logical_shape(const std::vector<shape>& operands) const;
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands, const shape& dst,
                                      bool any_weights) const;
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                      const shape& dst) const {
        return make_pd(eng, operands, dst, !weights.empty());
    }
    // The weights (b) as oneDNN sees them for a result of rank `rank`: the IR layout, or
    // (constant) the layout the lowering stores them in.
    dnnl::memory::desc weights_md(std::size_t rank, bool constant) const;
    void bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                       const std::vector<argument>& constants, const dnnl::engine& eng) const;
};

// The oneDNN view of a matrix operand at rank `rank`, its last two dims swapped when
// `transpose` is set.
dnnl::memory::desc matrix_md(const shape& s, std::size_t rank, bool transpose);

}  // namespace kiln::cpu
