// exhaustive_tune on the cpu target: a convolution or matrix product times every candidate
// of its selection list that can take it (selection.hpp, with `rules` off) and keeps the
// fastest, as MIGraphX's problem cache does for its GPU kernels.
//
// Each candidate is lowered into a trial module of its own: the anchor's operands as
// buffers in the layouts the real program gives them (a residual that the real program
// lets a kernel write into is such a buffer here too), its weights, its post-ops. The
// trials' kernels are finalized once, then run in alternation (after two warm-up runs
// each) for a few rounds, each scored by its fastest run. Buffers persist across runs, so
// no run pays for fresh pages, as in the planned arena of a real program.
//
// The choice is recorded under the problem's key (machine, threads, anchor, its cpu op
// with layouts and post-ops, operand shapes and layouts, result shape) in the context's
// tuning_table, and from there in KILN_TUNING_CACHE; a compiled program holds the chosen
// kernels themselves, so loading a saved .kiln never measures.
#pragma once
#include "targets/cpu/selection.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

// The problem's key in the tuning table.
std::string tuning_key(const anchor_site& site);

// The candidate to use for the site: the table's record, or measured now and recorded;
// nullopt when fewer than two candidates can take it (nothing to choose).
std::optional<tuning_record> tuned_choice(anchor_site& site);

// A candidate that is no anchor's (the int8 kernels of a quantized product, tuning_int8.hpp):
// `build` lowers the problem into the trial module of `scratch` (operands made by
// trial_operand, the kernel, the return), false when it cannot take it.
struct trial_candidate {
    std::string name;
    std::function<bool(lower_env& scratch)> build;
};
// Measures such candidates as the anchors' are (trials run alternately, each scored by its
// best run); nullopt when fewer than two could build their trial.
// `preferred`: the candidate the rules would choose; kept unless another is faster by more
// than the tuner's margin (tuning.cpp, rule_margin).
std::optional<tuning_record> measure_candidates(cpu_context& ctx, const std::vector<trial_candidate>& candidates,
                                                const std::string& preferred = {});
// The name a record gives the rules' own choice when the tuner kept it (anchors: what the
// rules lower, measured as a candidate of its own).
inline constexpr const char* rules_choice = "rules";
// Real operand x (not a literal) as a trial operand in `scratch`: a buffer of x's layout in
// `real` seen with x's shape; `owns`: a kernel may write into it (sum_post_op.hpp).
instruction_ref trial_operand(lower_env& scratch, const lower_env& real, instruction_ref x, bool owns);
// The key's machine part: CPU model, ISA, threads.
std::string tuning_machine_key(const cpu_context& ctx);

// "tuned: winograd 0.68 ms (conv_gemm 1.24, onednn 1.04)", for profiles.
std::string tuning_note(const tuning_record& r);

}  // namespace kiln::cpu
