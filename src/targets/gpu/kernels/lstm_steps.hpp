// gpu::lstm_steps: the recurrence of an ONNX LSTM once its input projection is done
// (selection: lower_lstm.cpp), the body of the generated kernel that runs it
// (codegen/emit_lstm.hpp). Default activations (sigmoid, tanh, tanh), no peepholes, clip,
// sequence_lens or input_forget; layout 0.
//
// Inputs: xw [D, T*B, 4H] (X W^T per direction, gates i o f c in ONNX order), rt [D, H, 4H]
// (R transposed, any strides), then the present ones of bias [D, 8H] (Wb then Rb),
// initial_h [D, B, H], initial_c [D, B, H]. The result packs the LSTM's three outputs in
// one buffer [T + 2, D, B, H]: rows 0..T-1 are Y, row T is Y_h, row T + 1 is Y_c, so each
// output is a slice view of it (a kernel has one output buffer).
//
// Its compute is the reference (double, as the ref LSTM), used by the host runs of the
// kernel in tests; on the device only the generated kernel runs.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::gpu {

struct lstm_steps {
    std::int64_t direction = 0;  // 0 forward, 1 reverse, 2 bidirectional (direction 1 reversed)
    std::size_t batch = 1;       // B (xw's rows are T * B)
    bool has_bias = false;
    bool has_initial_h = false;
    bool has_initial_c = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.direction, "direction");
        f(self.batch, "batch");
        f(self.has_bias, "has_bias");
        f(self.has_initial_h, "has_initial_h");
        f(self.has_initial_c, "has_initial_c");
    }
    std::string name() const { return "gpu::lstm_steps"; }
    std::size_t directions() const { return direction == 2 ? 2 : 1; }
    bool reversed(std::size_t d) const { return direction == 1 || (direction == 2 && d == 1); }
    // Positions of the optional inputs (-1: absent).
    int bias_input() const { return has_bias ? 2 : -1; }
    int h0_input() const { return has_initial_h ? 2 + has_bias : -1; }
    int c0_input() const { return has_initial_c ? 2 + has_bias + has_initial_h : -1; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;
};

}  // namespace kiln::gpu
