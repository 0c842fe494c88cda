// Attention as exported models spell it, found in the IR for the targets that run it as
// one kernel (cpu::attention, the gpu target's generated attention kernel):
//
//   softmax(matmul(q, kt) [* c | / c] [+ mask | where(mask, ., fill)], last axis) -> matmul(., v)
//
// where the scale c is a scalar literal (either operand of a mul, the divisor of a div),
// the mask is the add's other operand or, in a select, where's condition (any shape; the
// targets check that it broadcasts) and its fill a scalar literal (either branch: GPT-2's
// causal mask keeps the scores where it is true), and every intermediate has the next
// step as its only reader. The match says what it
// found; the targets check shapes, types and strides themselves and rewrite.
#pragma once
#include <kiln/module.hpp>

#include <optional>
#include <vector>

namespace kiln::attention_match {

struct match {
    instruction_ref qk, pv;                // matmul(q, kt) and matmul(softmax, v)
    std::vector<instruction_ref> between;  // softmax, then the mask add (or where) and the scale: removed after
    std::optional<instruction_ref> mask;     // the add's other operand, or where's condition
    std::optional<instruction_ref> select;   // the where, when the mask chooses between scores and a fill
    bool fill_first = false;                 // where(mask, fill, scores): the fill where the mask is true
    std::optional<instruction_ref> scaling;  // the mul or div, when there is one
    float scale = 1.0f;                      // what multiplies Q K^T (1 / c for a div)
};

// The attention whose softmax is `sm`, or nothing. A softmax of rank >= 3; over dynamic
// dims (a generic program's) only with `dynamic`, for a target whose kernel takes sizes
// at run time (cpu::attention's generic form).
std::optional<match> match_at(instruction_ref sm, bool dynamic = false);

// Every match of module `m`, in program order.
std::vector<match> find_all(module& m, bool dynamic = false);

}  // namespace kiln::attention_match
