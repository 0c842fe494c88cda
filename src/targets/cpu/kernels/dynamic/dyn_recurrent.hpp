// cpu::dyn_recurrent: a generic program's GRU or vanilla RNN (cpu::gru, cpu::rnn: oneDNN's
// primitives) over a sequence length and batch known only when it runs.
//
// Why: the static ops build their oneDNN primitive for one [T, N, I] at compile time, and a
// generic program's recurrent layer ran the reference kernel: torchaudio's DeepSpeech (a
// bidirectional ReLU RNN, hidden 256) 40.6 ms a call at 300 steps against 4.1 ms for its
// static program, 9x ONNX Runtime, on every call with a new length (audio rarely repeats
// one). This op keeps the static op as a template and finalizes a copy of it for each
// operand shape on the first call with that shape (its weights packed then; at most
// `max_cached` shapes, the least recently used dropped).
//
// Operands: the template's (x [T, N, I], w_layer, w_iter, bias[, h0]); the result is its
// [T, N, D * H], allocated per call.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/context.hpp>
#include <kiln/operation.hpp>

#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::cpu {

struct dyn_recurrent_cache {
    struct entry {
        std::string key;  // the operands' dims
        operation op;     // the template, finalized for them
    };
    std::mutex mutex;
    std::list<std::shared_ptr<const entry>> entries;
};

struct dyn_recurrent {
    operation cell;  // a cpu::gru or cpu::rnn, not finalized
    std::shared_ptr<dyn_recurrent_cache> cache = std::make_shared<dyn_recurrent_cache>();

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
