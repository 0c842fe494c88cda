// A program with dynamic inputs, compiled once (docs/architecture.md, "Dynamic shapes"):
// the generic program that runs every shape in range, programs for ranges (the inputs'
// optimals, or a name that keeps changing) and static specializations compiled in the
// background for shapes that recur, in one cache shared by the program's copies.
// program.cpp owns the program; this is the part that chooses what a call runs on.
#pragma once
#include "core/dynamic_padding.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

// What eval checks its inputs against: the caller-visible parameters of the main module
// and their named dims (parsed once), computed when a program is compiled.
struct parameter_info {
    struct named_dim {
        std::string input;
        std::size_t axis;
        std::string symbol;
        dim_expr expr;
    };
    std::vector<const instruction*> params;
    std::vector<named_dim> named;
};


std::shared_ptr<const parameter_info> describe_parameters(const module& m);

// One compiled static program of a dynamic one, for one set of input shapes.
struct specialization {
    program prog;
    memory_usage usage;  // prog's, computed once rather than on every eval
};


struct specialization_cache;

// The compiled forms of `source` (the parsed program, dims symbolic): the generic program,
// which `compile_generic` compiles from a copy (throwing where the target cannot: then
// every new set of shapes is specialized on its first call), and the programs for the
// inputs' optimals, compiled here or, when `ahead` is given, taken from it (a .kiln's:
// programs that compiled_ahead() gave, each for one set of the source's input shapes).
std::shared_ptr<specialization_cache> make_specialization_cache(std::shared_ptr<const program> source,
                                                                const target& t, const compile_options& options,
                                                                const std::function<void(program&)>& compile_generic,
                                                                std::shared_ptr<context> parent,
                                                                std::optional<std::vector<program>> ahead = {});

// The programs compiled for the optimals (not those added later for shapes seen at run
// time), in the order they were compiled: what a .kiln saves beside the source.
std::vector<std::shared_ptr<const program>> compiled_ahead(specialization_cache& cache);

// The program to run a call on, its inputs checked against the ranges (`info`'s).
std::shared_ptr<const specialization> specialization_for(specialization_cache& cache, const parameter_info& info,
                                                         const param_map& checked);

// The call padded up to the next bucket of its dims (compile_options::dynamic_buckets,
// where the program keeps their rows apart), counted as a padded run; nullopt when no
// padding applies.
std::optional<padded_call> pad_to_buckets(specialization_cache& cache, const param_map& checked);

specialization_stats stats_of(specialization_cache& cache);
void wait_for_background_compiles(specialization_cache& cache);
// The usage of the program that ran last; before the first call that of the first program
// compiled ahead (nullopt when there is none).
std::optional<memory_usage> last_usage(specialization_cache& cache);
// The program that ran last (the one specialization_for gave last), if it is still held;
// null before any run.
std::shared_ptr<const specialization> last_ran(specialization_cache& cache);

}  // namespace kiln
