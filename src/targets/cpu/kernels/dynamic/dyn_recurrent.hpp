// cpu::dyn_recurrent: a generic program's GRU or vanilla RNN (cpu::gru, cpu::rnn: oneDNN's
// primitives) over a sequence length and batch known only when it runs.
//
// Why: the static ops build their oneDNN primitive for one [T, N, I] at compile time, and a
// generic program's recurrent layer ran the reference kernel: torchaudio's DeepSpeech (a
// bidirectional ReLU RNN, hidden 256) 40.6 ms a call at 300 steps against 4.1 ms for its
// static program, 9x ONNX Runtime, on every call with a new length (audio rarely repeats
// one). This op keeps the static op as a template and finalizes a copy of it for each
// shape of x and h0 on the first call with it (its weights packed then; at most `max_cached`
// shapes, the least recently used dropped: shape_cache.hpp).
//
// Operands: the template's (x [T, N, I], w_layer, w_iter, bias[, h0]); the result is its
// [T, N, D * H], allocated per call.
#pragma once
#include "targets/cpu/kernels/dynamic/shape_cache.hpp"

#include <kiln/argument.hpp>
#include <kiln/context.hpp>
#include <kiln/operation.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

// One shape's cell of a cpu::dyn_recurrent.
struct dyn_recurrent_entry {
    std::string key;  // x's and h0's dims and strides
    operation op;     // the template, finalized for them
};

struct dyn_recurrent {
    operation cell;  // a cpu::gru or cpu::rnn, not finalized
    std::shared_ptr<shape_cache<dyn_recurrent_entry>> cache = std::make_shared<shape_cache<dyn_recurrent_entry>>();

    static constexpr std::size_t max_cached = 16;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.cell, "cell");
    }
    std::string name() const { return "cpu::dyn_recurrent"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::size_t cached_shapes() const;
};

}  // namespace kiln::cpu
