// Recurrent layers: ONNX RNN, GRU and LSTM, every direction, layout, activation,
// clip, initial state, peephole and sequence_lens. Inputs are X, W, R, then the
// optional inputs the `has_*` flags say are present, in ONNX order (B,
// sequence_lens, initial_h, initial_c, P). The result is tuple(Y, Y_h) (LSTM: and
// Y_c). Computed in double, returned in the input type.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

enum class rnn_kind : std::uint8_t { rnn, gru, lstm };

struct recurrent_attributes {
    std::size_t hidden_size = 0;
    std::int64_t direction = 0;  // 0 forward, 1 reverse, 2 bidirectional
    std::vector<std::string> activations;  // per direction, as ONNX names them ("Tanh", ...)
    std::vector<float> activation_alpha;
    std::vector<float> activation_beta;
    float clip = 0;  // 0: no clipping
    std::int64_t layout = 0;
    bool has_bias = false;
    bool has_sequence_lens = false;
    bool has_initial_h = false;
    bool has_initial_c = false;
    bool has_peephole = false;
    bool linear_before_reset = false;  // GRU
    bool input_forget = false;         // LSTM

    template <class Self, class F>
    static void reflect_attributes(Self& self, F f) {
        f(self.hidden_size, "hidden_size");
        f(self.direction, "direction");
        f(self.activations, "activations");
        f(self.activation_alpha, "activation_alpha");
        f(self.activation_beta, "activation_beta");
        f(self.clip, "clip");
        f(self.layout, "layout");
        f(self.has_bias, "has_bias");
        f(self.has_sequence_lens, "has_sequence_lens");
        f(self.has_initial_h, "has_initial_h");
        f(self.has_initial_c, "has_initial_c");
        f(self.has_peephole, "has_peephole");
        f(self.linear_before_reset, "linear_before_reset");
        f(self.input_forget, "input_forget");
    }
    std::size_t num_directions() const { return direction == 2 ? 2 : 1; }
};

shape recurrent_compute_shape(rnn_kind kind, const recurrent_attributes& a, const std::vector<shape>& inputs);
argument recurrent_compute(rnn_kind kind, const recurrent_attributes& a, const std::vector<argument>& args);

template <rnn_kind Kind>
struct recurrent_op : recurrent_attributes {
    template <class Self, class F>
    static void reflect(Self& self, F f) { reflect_attributes(self, f); }
    std::string name() const {
        return Kind == rnn_kind::rnn ? "rnn" : Kind == rnn_kind::gru ? "gru" : "lstm";
    }
    shape compute_shape(const std::vector<shape>& inputs) const { return recurrent_compute_shape(Kind, *this, inputs); }
    argument compute(const shape&, const std::vector<argument>& args) const {
        return recurrent_compute(Kind, *this, args);
    }
};

using rnn = recurrent_op<rnn_kind::rnn>;
using gru = recurrent_op<rnn_kind::gru>;
using lstm = recurrent_op<rnn_kind::lstm>;

// Number of gates: RNN 1, GRU 3, LSTM 4; and of activations per direction: 1, 2, 3.
std::size_t num_gates(rnn_kind kind);
std::size_t num_activations(rnn_kind kind);

}  // namespace kiln::op
