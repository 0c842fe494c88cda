// cpu::lstm: a unidirectional ONNX LSTM (default activations, no clip, peepholes or
// sequence lengths, time-major layout) on oneDNN's LSTM primitive, producing Y only.
//
// Operands: (x [T, N, I], w_layer, w_iter, bias[, h0 [1, N, H]][, c0 [1, N, H]]). The
// lowering stores the weights once in oneDNN's plain gate order and layout (ldigo:
// [1, 1, I or H, 4, H], gates i, f, c~, o; bias ldgo [1, 1, 4, H], ONNX's two biases
// summed); finalize lets the primitive pack them for this CPU. The result Y has
// ONNX's shape [T, 1, N, H] (the same memory as oneDNN's [T, N, H]).
//
// cpu::lstm_packed: the same LSTM (also bidirectional, with peepholes) on Kiln's own
// kernel (lstm_kernel.hpp), the default; KILN_CPU_LSTM=dnnl keeps cpu::lstm instead.
// Operands: (x [T, N, I], w, r, bias[, peep][, h0 [D, N, H]][, c0 [D, N, H]]) with the
// weights packed by lstm_pack, then a float32 workspace and the output buffer Y
// [T, D, N, H]. KILN_CPU_LSTM=portable runs the portable kernel instead of the vector one.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_op.hpp"

namespace kiln::cpu {

// Whether one step's recurrent product, N x (gates x directions) x H x H multiply-adds for
// x [T, N, I], is under single_thread_macs (cpu::gru, cpu::rnn).
inline bool small_step(const std::vector<shape>& operands, std::size_t gate_rows, std::size_t hidden_size) {
    const std::size_t n = operands.empty() || operands[0].ndim() != 3 ? 0 : operands[0].lens()[1];
    return n * gate_rows * hidden_size * hidden_size < single_thread_macs;
}

struct lstm : dnnl_op<lstm> {
    static constexpr bool work_per_element = false;  // a product: the result hides its depth
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

// cpu::gru: an ONNX GRU (default activations, no clip or sequence lengths, time-major) on
// oneDNN's GRU primitive: gru_forward for linear_before_reset 0, lbr_gru_forward for 1 (the
// two cells compute ONNX's two formulas; oneDNN's gates u, r, o are ONNX's z, r, h in that
// order, and both write h_t = u * h_{t-1} + (1 - u) * o as ONNX does).
// Operands: (x [T, N, I], w_layer [1, D, I, 3, H], w_iter [1, D, H, 3, H], bias [1, D, 3 or
// 4, H][, h0 [D, N, H]]), weights stored plain (ldigo) by the lowering and relaid out
// once at finalize where the primitive wants another layout. The result is oneDNN's dst_layer [T, N, D * H] (bidirectional:
// concatenated); the lowering gives ONNX's Y and Y_h as views and copies of it.
struct gru : dnnl_op<gru> {
    static constexpr bool work_per_element = false;  // a product: the result hides its depth
    std::size_t hidden_size = 0;
    std::int64_t direction = 0;  // ONNX's: 0 forward, 1 reverse, 2 bidirectional
    bool linear_before_reset = false;
    bool has_initial_h = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.hidden_size, "hidden_size");
        f(self.direction, "direction");
        f(self.linear_before_reset, "linear_before_reset");
        f(self.has_initial_h, "has_initial_h");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::gru"; }
    std::size_t directions() const { return direction == 2 ? 2 : 1; }
    // Each step waits for the last: a team meets at every step, so when one step's
    // recurrent product (N x D x 3H x H multiply-adds) is under single_thread_macs the
    // calling thread runs it alone (a PyTorch 2-layer bidirectional GRU, hidden 128, 200 steps,
    // batch 1, took 38 ms with 2 threads on a loaded 2-core machine, 2.6 ms with one).
    bool small_work(const std::vector<shape>& operands, const shape&) const {
        return small_step(operands, directions() * 3, hidden_size);
    }
    shape logical_shape(const std::vector<shape>& operands) const;
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                      const shape& dst) const;
    void bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                       const std::vector<argument>& constants, const dnnl::engine& eng) const;
};

// cpu::rnn: an ONNX RNN (one activation for every direction: Relu, Tanh or Sigmoid; no clip
// or sequence lengths; time-major) on oneDNN's vanilla RNN primitive: h_t = f(x_t W + h_{t-1} R
// + Wb + Rb), ONNX's formula. Operands as cpu::gru's with one gate (x [T, N, I], w_layer
// [1, D, I, 1, H], w_iter [1, D, H, 1, H], bias [1, D, 1, H][, h0 [D, N, H]]), and the same
// result, oneDNN's dst_layer [T, N, D * H]. DeepSpeech's bidirectional ReLU RNN ran on the
// reference kernel: 39.6 of 40.4 ms a run at 300 steps (hidden 256).
struct vanilla_rnn : dnnl_op<vanilla_rnn> {
    static constexpr bool work_per_element = false;  // a product: the result hides its depth
    std::size_t hidden_size = 0;
    std::int64_t direction = 0;  // ONNX's: 0 forward, 1 reverse, 2 bidirectional
    std::string activation = "Tanh";  // ONNX's name: Relu, Tanh or Sigmoid
    bool has_initial_h = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.hidden_size, "hidden_size");
        f(self.direction, "direction");
        f(self.activation, "activation");
        f(self.has_initial_h, "has_initial_h");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    std::string name() const { return "cpu::rnn"; }
    std::size_t directions() const { return direction == 2 ? 2 : 1; }
    // As cpu::gru: a step's recurrent product under single_thread_macs runs on the calling thread.
    bool small_work(const std::vector<shape>& operands, const shape&) const {
        return small_step(operands, directions(), hidden_size);
    }
    shape logical_shape(const std::vector<shape>& operands) const;
    dnnl::primitive_desc_base make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                      const shape& dst) const;
    void bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                       const std::vector<argument>& constants, const dnnl::engine& eng) const;
};

struct lstm_packed {
    std::size_t hidden_size = 0;
    std::size_t directions = 1;
    bool reverse = false;
    bool has_peephole = false;
    bool has_initial_h = false;
    bool has_initial_c = false;
    // The result is [T + 2, D, N, H]: Y, then Y_h and Y_c as rows T and T + 1 (the lowering
    // gives each output's users a slice of it); without, just Y [T, D, N, H].
    bool final_states = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.hidden_size, "hidden_size");
        f(self.directions, "directions");
        f(self.reverse, "reverse");
        f(self.has_peephole, "has_peephole");
        f(self.has_initial_h, "has_initial_h");
        f(self.has_initial_c, "has_initial_c");
        f(self.final_states, "final_states");
    }
    std::string name() const { return "cpu::lstm_packed"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

}  // namespace kiln::cpu
