// A fused group analysed for one set of input shapes: the iteration space, how each
// tensor is addressed in it, and each node's place in the schedule. Target-neutral: the
// cpu target's source generator and interpreter (src/targets/cpu/codegen) and the gpu
// target's CUDA generator (src/targets/gpu/codegen) all run from a plan, so they agree on
// what a group computes and in which order.
//
// Iteration space. The group's domain (the lens its members are evaluated over) is split
// into outer dims (kept) and inner dims (reduced by the group's reductions; none for an
// elementwise group), each list in row-major order, with length-1 dims dropped and
// adjacent dims merged where every tensor's strides allow it. A kernel call covers a
// range of work units: elements of the outer space (elementwise groups) or rows, i.e.
// outer indices (reduction groups).
//
// Schedule of a reduction group, per row: the reductions run in passes over the inner
// space (a reduction whose input needs another reduction's result goes in a later pass;
// independent ones share a pass); `row` nodes (lens 1 on every reduced axis) are computed
// once per row as soon as the reductions they need are done; other nodes are recomputed
// inside each loop that needs them (cheap next to a second trip through memory).
#pragma once
#include "ops/fused.hpp"

#include <kiln/module.hpp>
#include <kiln/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::codegen {

// How a kernel addresses one tensor: element strides over the outer and inner dims.
struct access {
    type t = type::float32;
    std::vector<std::int64_t> outer;
    std::vector<std::int64_t> inner;
    bool row_level() const;  // one element per row (all inner strides 0)
    bool invariant() const;  // one element for the whole space
};

enum class node_kind : std::uint8_t { input, constant, op, reduce };

struct node {
    node_kind kind = node_kind::op;
    operation op;                   // op and reduce nodes
    std::string name;               // op name, for the op tables
    std::vector<std::size_t> args;  // plan node indices
    type t = type::float32;         // result element type
    bool row = false;               // one value per row (reduction groups)
    std::size_t input = 0;          // input nodes: the fused input
    double value = 0;               // constant nodes, in t
    // reduce nodes: the pass (1-based) computing it; others: the last pass whose results
    // it needs (0: none), i.e. a row node is ready after that pass.
    std::size_t pass = 0;
};

struct plan {
    std::vector<std::size_t> outer_lens;  // at least one dim
    std::vector<std::size_t> inner_lens;  // reduction groups: at least one dim
    bool reduction = false;
    std::vector<access> inputs;
    access output;
    std::vector<node> nodes;  // input nodes first (one per fused input), then constants and ops in order
    std::size_t root = 0;
    std::size_t passes = 0;        // reduction passes per row
    std::size_t reduce_count = 1;  // elements each reduction combines
    bool fast_math = true;

    std::size_t outer_size() const;
    std::size_t inner_size() const;
    // Work units one call splits into ranges: outer elements or rows.
    std::size_t work() const { return outer_size(); }
    // Whether the root is written once per row (a reduction group whose result is reduced).
    bool row_output() const { return reduction && nodes[root].row; }
};

// Analyses `f` for these input shapes (any strides) and the output shape. Throws a kiln
// `unsupported` error naming the node when the group holds an op or an element type that
// kernels do not handle.
plan make_plan(const op::fused& f, const std::vector<shape>& inputs, const shape& output, bool fast_math);

// Whether kernels handle this op with these input and result types (the fusion pass's
// `supported` on the cpu target). Reductions are checked by name and types only.
bool kernel_supports(const std::string& op_name, const value& attributes, const std::vector<type>& inputs, type result);

// Whether a fused kernel can hold this instruction: its op and element types
// (kernel_supports), static shapes, no empty result. float16/bfloat16 values only when
// `float16` (the gpu target; the cpu target widens 16-bit programs before fusion).
bool kernel_can_run(instruction_ref ins, bool float16 = false);
// kernel_can_run's test of the op and its element types alone (any shapes, static or not).
bool kernel_types_supported(instruction_ref ins, bool float16 = false);

// float16 or bfloat16: stored in 16 bits, computed in float.
bool is_float16(type t);

// A lone elementwise op as a one-node group: its scalar literal inputs go inside, its
// other inputs are appended to `inputs`.
op::fused single_group(instruction_ref ins, std::vector<instruction_ref>& inputs);

// Reduction kinds by op name ("reduce_mean" -> "mean"); empty for other ops.
std::string reduction_kind(const std::string& op_name);

}  // namespace kiln::codegen
