// cpu::lstm: a unidirectional ONNX LSTM (default activations, no clip, peepholes or
// sequence lengths, time-major layout) on oneDNN's LSTM primitive, producing Y only.
//
// Operands: (x [T, N, I], w_layer, w_iter, bias[, h0 [1, N, H]][, c0 [1, N, H]]). The
// lowering stores the weights once in oneDNN's plain gate order and layout (ldigo:
// [1, 1, I or H, 4, H], gates i, f, c~, o; bias ldgo [1, 1, 4, H], ONNX's two biases
// summed); finalize lets the primitive pack them for this CPU. The result Y has
// ONNX's shape [T, 1, N, H] (the same memory as oneDNN's [T, N, H]).
#pragma once
#include "targets/cpu/dnnl_op.hpp"

namespace kiln::cpu {

struct lstm : dnnl_op<lstm> {
    std::size_t hidden_size = 0;
    bool reverse = false;
    bool has_initial_h = false;
    bool has_initial_c = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.hidden_size, "hidden_size");
        f(self.reverse, "reverse");
        f(self.has_initial_h, "has_initial_h");
        f(self.has_initial_c, "has_initial_c");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::lstm"; }
    shape logical_shape(const std::vector<shape>& operands) const;
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                      const shape& dst) const;
    void bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                       const std::vector<argument>& constants, const dnnl::engine& eng) const;
};

}  // namespace kiln::cpu
