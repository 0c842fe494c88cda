// cpu::gather_blocks: ONNX Gather of a row-major tensor along any axis: for each outer
// index and each (int32 or int64) index, one contiguous block of the data copied into the
// planned output buffer: an embedding lookup is one row copy per token.
//
// Why not the reference kernel: it allocates its result on every run, and copies rows one
// after another from a table that is usually out of the caches. Here every line of the
// rows is asked for first, so the misses overlap (bert_small's word-embedding lookup of
// 128 tokens: 13-16 us against 38-39, 5 alternating runs). Indices are checked on every
// run (negative ones count from the end; out of range raises a runtime error naming the
// op), as the ONNX semantics ask.
//
// Inputs: (data, indices, output buffer).
#pragma once
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct gather_blocks {
    std::int64_t axis = 0;  // normalized: 0 <= axis < data's rank

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "cpu::gather_blocks"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// Replaces a gather of static row-major data by a cpu::gather_blocks; false, changing
// nothing, when the shapes are not static or the data is in a oneDNN layout.
bool lower_gather_blocks(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
