// Kernel selection as data: for each op the cpu target lowers, its candidate kernels in
// priority order, each with its name, the rule that takes it (prose, for docs) and its
// lowering. The lowering walks the list and the first candidate that takes the
// instruction wins; a switch in cpu_options (KILN_CPU_WINOGRAD=0, ...) removes a candidate
// from the list. docs/architecture.md's table is this list (a unit test checks the
// document against it).
//
// Two kinds of lists:
//  - anchors (convolution, matrix product): planned first with the post-ops they absorb
//    (anchor_plan.hpp); a candidate lowers the plan. `rules` false asks a candidate to take
//    the plan whenever it can, not only where its thresholds choose it (what the tuner
//    measures).
//  - every other op: a candidate lowers one instruction.
// Whatever no candidate takes stays for the reference kernels.
#pragma once
#include "targets/cpu/anchor_plan.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <string>
#include <vector>

namespace kiln::cpu {

// A planned anchor and where its kernel goes.
struct anchor_site {
    lower_env& env;
    anchor_plan& plan;                      // operands already in the layouts the plan wants
    instruction_ref pos;                    // the instruction the kernel replaces (the chain's last)
    std::vector<instruction_ref> replaced;  // what it replaces (a residual it may write into)
};

struct anchor_candidate {
    const char* anchor;  // "convolution" (and deconvolution) or "matmul" (and gemm)
    const char* name;    // the kernel
    const char* rule;    // when the rules take it
    bool (*lower)(anchor_site& site, bool rules);
};

struct op_candidate {
    // The op it lowers: a name, a prefix ending in '*', "" for every op (tried first), or
    // "other" for the ops no entry names.
    const char* op;
    const char* name;
    const char* rule;
    bool f32_static;  // only when the op and its inputs are static float32 tensors
    bool (*lower)(lower_env& env, instruction_ref ins);
};

const std::vector<anchor_candidate>& anchor_candidates();
const std::vector<op_candidate>& op_candidates();

// The anchor kind of a plan ("convolution" or "matmul").
std::string anchor_kind(const anchor_plan& p);
// Lowers a planned anchor with the first candidate that takes it; its name, or "" when none
// did (the anchor and its chain then stay for the reference kernels).
std::string lower_anchor(anchor_site& site);
// Lowers any other instruction with the first candidate that takes it; its name, or "".
std::string lower_op(lower_env& env, instruction_ref ins);

// The name of the own int8 kernel (an op candidate) that will take quantized product `ins`
// where the CPU has no VNNI int8 dot product, or nullptr: dequantize_without_vnni turns
// exactly the others back into float ops.
const char* own_int8_kernel_for(module& m, instruction_ref ins, const cpu_options& o);

// Both lists as a markdown table (op, kernel, rule), in priority order.
std::string selection_table_markdown();

}  // namespace kiln::cpu
