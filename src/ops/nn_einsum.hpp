// Einsum (ONNX Einsum, NumPy einsum semantics) and Det (determinants of square
// matrices in the last two dims).
#pragma once
#include "ops/nn_common.hpp"

#include <kiln/operation.hpp>

namespace kiln::op {

// `equation` as in ONNX: comma-separated input terms of letters, at most one "..." per
// term, and optionally "->" and the output term. A letter repeated within a term takes
// a diagonal; letters missing from the output are summed over. Without "->" the output
// is the broadcast "..." dims followed by the letters used once, in alphabetical order.
struct einsum {
    std::string equation;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.equation, "equation"); }
    std::string name() const { return "einsum"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;

    // The equation resolved against concrete input lens: one loop variable per distinct
    // letter and per broadcast "..." dim.
    struct plan {
        std::vector<std::size_t> sizes;                  // per variable
        std::vector<std::vector<std::size_t>> strides;   // [input][variable], 0 = not used
        std::vector<std::size_t> output_vars;            // variables of the output, in order
        std::vector<std::size_t> output_lens;
    };
    plan make_plan(const std::vector<std::vector<std::size_t>>& lens) const;
};

struct det {
    std::string name() const { return "det"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
