// Groups elementwise ops, and reductions with their elementwise neighbours (softmax and
// layer-norm spelled out, GELU and SiLU chains, mean/variance), into one `fused`
// instruction each (src/ops/fused.hpp), for a target to run as one kernel.
//
// A group has one result (its root) and a domain: the lens every member is evaluated
// over (the root's, or the input of its reductions). An instruction joins the group of
// its users when
//   * all of its users are in that one group (so no intermediate result is needed
//     outside it, and it is not a program output), which also keeps groups free of
//     cycles: every member is an ancestor of the root and nothing leaves and re-enters;
//   * its lens broadcast (NumPy, right-aligned) to the domain;
//   * for a reduction: it keeps its dims, its input has exactly the domain's lens, and
//     it reduces the same axes as the group's other reductions.
// The module is walked from the back, so an instruction's users are placed before it.
// Scalar literal inputs move into the body (fused_literal nodes); other inputs stay inputs.
#pragma once
#include <kiln/module.hpp>

#include <cstddef>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln {

struct fuse_pointwise {
    // Whether an instruction may join a group (the target can run it in a fused kernel).
    // Empty: every pointwise op and static reduction over static float shapes.
    std::function<bool(instruction_ref)> supported;
    // Instructions to leave alone, computed once per module before grouping: what a
    // target's own fusion claims (elementwise work that becomes a post-op of a
    // convolution or matrix product).
    std::function<std::unordered_set<const instruction*>(module&)> reserved;
    bool reductions = true;
    // Also group ops over dynamic shapes (a generic program's): their dims must broadcast
    // as dynamic dims, equal ones or a fixed 1; reductions only over trailing axes
    // (is_fusible_dynamic_reduction).
    bool dynamic = false;
    // Groups with fewer ops stay as they were.
    std::size_t min_size = 2;

    std::string name() const { return "fuse_pointwise"; }
    void apply(module& m) const;
};

// Reductions a group may hold: ops with traits().reduction but reduce_log_sum_exp
// (reduce_{sum, mean, max, min, prod, l1, l2, sum_square, log_sum}) with constant axes
// (the one-input form) over at least one axis.
bool is_fusible_reduction(instruction_ref ins);
// A reduction a group over dynamic dims may hold: the same ops, over a dynamic input,
// keeping its dims, reducing its last axes (a suffix: one inner loop per row).
bool is_fusible_dynamic_reduction(instruction_ref ins);
// The reduced axes (sorted) and keepdims of such a reduction op.
std::vector<std::size_t> reduction_axes(const operation& op, std::size_t rank);
bool reduction_keepdims(const operation& op);

}  // namespace kiln
