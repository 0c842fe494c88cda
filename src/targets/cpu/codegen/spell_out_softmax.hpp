// spell_out_softmax (before the fusion pass): a generic program's softmax and log_softmax
// over the last axis as the ops that compute them (the row's max, exp of the difference,
// the row's sum, a division or a log), so that the fusion pass puts them, and the
// elementwise ops before them (an attention's scale and mask), into one generated kernel
// over run-time sizes (generic_layout.hpp): two passes over each row and the result.
//
// Why: the cpu target's softmax kernels (oneDNN's primitive, the fused attention) are made
// for one shape; a generic program's softmax ran the reference kernel (bert_small at 128
// tokens: 0.74 ms each of 4, a third of the generic program's time after its other
// elementwise work got kernels). Static programs keep their softmax as it is, and so does
// a generic program's attention that cpu::attention takes (generic_attentions).
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln::cpu {
struct cpu_options;
}

namespace kiln::cpu::codegen {

struct spell_out_softmax {
    const cpu_options* options = nullptr;  // which attentions stay whole (none without it)
    std::string name() const { return "cpu::spell_out_softmax"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu::codegen
