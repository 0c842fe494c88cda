// cpu::dyn_lstm: a generic program's LSTM (cpu::lstm_packed, Kiln's own kernel) over a
// sequence length and batch known only when it runs.
//
// Why: cpu::lstm_packed takes a workspace and an output buffer sized for one [T, N, I] at
// compile time, and a generic program's LSTM ran the reference kernel: the shared lstm_seq
// model (two layers, hidden 256) took 44 ms a call against 1.26 ms for its static program,
// on every call with a new length (speech and text rarely repeat one). The packed weights
// depend on I, H and the directions only, so nothing is made per shape: each call sizes
// the workspace and the result, copies x and the initial states row-major when they come
// as views (a batch-first model's transposes), and runs the same kernel.
//
// Operands: lstm_packed's without its last two (x [T, N, I], w, r, bias[, peep][, h0
// [D, N, H]][, c0 [D, N, H]]); the result is lstm_packed's, [T, D, N, H] or, with the
// final states, [T + 2, D, N, H] (Y_h and Y_c as rows T and T + 1).
#pragma once
#include <kiln/argument.hpp>
#include <kiln/context.hpp>
#include <kiln/operation.hpp>

#include <string>
#include <vector>

namespace kiln::cpu {

struct dyn_lstm {
    operation cell;  // a cpu::lstm_packed

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.cell, "cell");
    }
    std::string name() const { return "cpu::dyn_lstm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::cpu
