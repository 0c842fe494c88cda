// The target-independent pipeline and the table of passes by name.
#include "passes/common_subexpression_elimination.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/fuse_qdq.hpp"
#include "passes/loop_append.hpp"
#include "passes/memory_coloring.hpp"
#include "passes/merge_literals.hpp"
#include "passes/propagate_constants.hpp"
#include "passes/schedule.hpp"
#include "passes/simplify_algebra.hpp"
#include "passes/simplify_dynamic_ops.hpp"
#include "passes/simplify_reshapes.hpp"
#include "passes/split_batch.hpp"

#include <kiln/errors.hpp>
#include <kiln/pipeline.hpp>

#include <functional>
#include <map>

namespace kiln {

namespace {
const std::map<std::string, std::function<pass()>>& pass_table() {
    static const std::map<std::string, std::function<pass()>> table = {
        {"dead_code_elimination", [] { return pass(dead_code_elimination{}); }},
        {"dce", [] { return pass(dead_code_elimination{}); }},
        {"fuse_qdq", [] { return pass(fuse_qdq{}); }},
        {"loop_append", [] { return pass(loop_append{}); }},
        {"memory_coloring", [] { return pass(memory_coloring{}); }},
        {"merge_literals", [] { return pass(merge_literals{}); }},
        {"common_subexpression_elimination", [] { return pass(common_subexpression_elimination{}); }},
        {"cse", [] { return pass(common_subexpression_elimination{}); }},
        {"propagate_constants", [] { return pass(propagate_constants{}); }},
        {"simplify_dynamic_ops", [] { return pass(simplify_dynamic_ops{}); }},
        {"simplify_algebra", [] { return pass(simplify_algebra{}); }},
        {"simplify_reshapes", [] { return pass(simplify_reshapes{}); }},
        {"schedule", [] { return pass(schedule{}); }},
        {"split_batch", [] { return pass(split_batch{}); }},
    };
    return table;
}
}  // namespace

// Why this order:
//  1. dce first: parsed graphs carry unused outputs and exporter leftovers; nothing after
//     should spend time on them.
//  1b. loop_append: Loop bodies that grow a carried value with Concat return only the new
//     rows, so the loop concatenates once instead of copying the value every iteration.
//  2. fuse_qdq turns quantized models' DequantizeLinear -> Conv/MatMul/Gemm [-> QuantizeLinear]
//     groups into integer ops before propagate_constants folds a small weight's
//     DequantizeLinear into float32 (its int8 values would be lost). In this pipeline, not
//     a target's: ref then runs the same integer semantics as cpu (kiln verify compares
//     like with like), as ORT's optimized QDQ models do.
//  2b. simplify_dynamic_ops turns run-time shape arithmetic (Shape -> Gather -> Concat ->
//     Reshape) into static ops with literal shapes once input shapes are known. The
//     rewriting passes below only match static ops, and constant propagation then folds
//     what is left of that arithmetic.
//  3. propagate_constants folds literal-only instructions (weight transposes, casts,
//     shape math), so the rules below see their constant operands as literals.
//  4. cse before the rewrites: merging duplicate consumers can leave a Conv or Gemm with
//     the single consumer that the weight folds require.
//  5. simplify_algebra folds BatchNormalization / scale / bias into weights, reassociates
//     constant chains, turns x/c into x*(1/c) and removes identities.
//  6. simplify_reshapes cancels reshape and transpose chains, some of which only meet
//     once the identities between them are gone; a second simplify_algebra then catches
//     folds that a cancelled reshape pair was hiding (it is cheap when nothing matches).
//  7. cse + dce at the end merge the duplicates the rewrites created (two chains
//     collapsed to the same reshape) and drop everything that was bypassed.
// Scheduling is not here: it orders the explicit buffers that only exist after a
// target's lowering, so targets run make_pass("schedule") just before memory_coloring.
std::vector<pass> target_independent_passes(const compile_options& opts) {
    return {
        dead_code_elimination{},
        loop_append{},
        fuse_qdq{},
        simplify_dynamic_ops{},
        propagate_constants{},
        dead_code_elimination{},
        common_subexpression_elimination{},
        simplify_algebra{opts.fast_math},
        simplify_reshapes{},
        simplify_algebra{opts.fast_math},
        common_subexpression_elimination{},
        dead_code_elimination{},
    };
}

std::vector<std::string> get_pass_names() {
    std::vector<std::string> names;
    for (auto& [k, v] : pass_table()) names.push_back(k);
    return names;
}

pass make_pass(const std::string& name) {
    auto it = pass_table().find(name);
    if (it == pass_table().end()) throw_error(error_code::invalid_argument, "unknown pass '" + name + "'");
    return it->second();
}

}  // namespace kiln
