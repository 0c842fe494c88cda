// A whole model: the main module, its sub-modules (control-flow bodies), and once
// compiled, the target state needed to run it.
#pragma once
#include <kiln/compile_options.hpp>
#include <kiln/module.hpp>
#include <kiln/target.hpp>
#include <kiln/value.hpp>

#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

// Time spent in one instruction over profiled runs (kiln perf --per-instruction).
struct instruction_profile {
    std::string module;
    std::size_t index = 0;   // position in its module (the @N of the text form)
    std::string op_name;     // e.g. "ref::kernel" or "convolution"
    std::string op_text;     // the op with its attributes
    std::string shape;       // the result's shape
    std::string note;        // the target's note on it (context::instruction_note), or ""
    double total_ms = 0;
    std::size_t calls = 0;
};

struct memory_usage {
    std::size_t arena_bytes = 0;      // the planned buffer of intermediate results
    std::size_t parameter_bytes = 0;  // the inputs the caller passes
    std::size_t literal_bytes = 0;    // weights and constants
    std::size_t output_bytes = 0;     // results handed back to the caller
};

// Counters of a dynamic program's specializations (all zero for a static program).
// Shared by copies of the program, like the specializations themselves.
struct specialization_stats {
    std::size_t compiles = 0;         // specializations compiled successfully so far
    std::size_t failed_compiles = 0;  // compiles that threw (never cached)
    std::size_t cached = 0;           // specializations held now (compiled or compiling)
    std::size_t evictions = 0;        // dropped to stay within max_specializations
    std::size_t hits = 0;             // calls that found their shapes cached (or being compiled)
    std::size_t max_specializations = 0;  // the bound in force (0 = unbounded)
    double compile_ms = 0;            // wall time spent compiling specializations
    bool generic = false;             // a generic program serves shapes not specialized
    std::size_t generic_runs = 0;     // calls the generic program served
    std::size_t background_compiles = 0;  // of `compiles`, those made in the background
    std::string generic_unavailable;  // why there is no generic program ("" when there is)
    std::size_t padded_runs = 0;      // calls padded up to a bucket (compile_options::dynamic_buckets)
};

class program {
public:
    program();
    ~program();
    program(const program& other);  // deep copy (compiled state is shared, read-only)
    program& operator=(const program& other);
    program(program&&) noexcept;
    program& operator=(program&&) noexcept;

    module_ref get_main_module() const;
    module_ref create_module(const std::string& name);
    module_ref get_module(const std::string& name) const;  // throws when missing
    bool has_module(const std::string& name) const;
    // Main first, then the others in creation order.
    std::vector<module_ref> get_modules() const;
    // Sub-modules before the modules that use them; main last.
    std::vector<module_ref> get_modules_postorder() const;
    void remove_module(const std::string& name);

    // Runs the target-independent passes, then the target's pipeline. A program whose
    // inputs have dynamic dimensions is compiled once as a generic program that runs
    // every shape in its ranges (its dims stay symbolic; instructions whose shapes vary
    // work them out as they run). Shapes that recur get specializations (static
    // programs compiled for them) in the background, see compile_options::
    // specialize_after; they are kept in an LRU cache of options.max_specializations
    // entries. Where the target cannot build the generic program, each new set of shapes
    // is specialized on its first eval instead. A compile holds no lock that other
    // callers wait on: evals with already compiled shapes run meanwhile, and concurrent
    // evals with the same new shapes share one compile. A compile that throws is not
    // cached: every eval waiting on it gets the error, and the next eval with those
    // shapes compiles again.
    void compile(const target& t, const compile_options& options = {});
    // The same with a context the caller made (target::derive_context): how a dynamic
    // program's specializations share its options and tuning; nullptr makes one.
    void compile(const target& t, const compile_options& options, std::shared_ptr<context> ctx);
    bool is_compiled() const;
    std::string target_name() const;  // "" before compile
    const compile_options& get_compile_options() const;

    // Runs the program. Every parameter must be given (by name), with its declared
    // element type and dimensions; errors name the parameter and what was expected.
    std::vector<argument> eval(const param_map& params) const;
    // Same, adding each instruction's wall time to `profile` (one entry per instruction
    // that ran, matched by module and index across calls).
    std::vector<argument> eval(const param_map& params, std::vector<instruction_profile>& profile) const;
    // eval, writing output i into outputs[i] (tensors of the outputs' element types and lens, not
    // overlapping the inputs). Where an output's buffer is a plain allocation and outputs[i] is a
    // 64-byte aligned row-major host tensor, the program computes it there directly (no copy);
    // the others are copied there after the run. Returns how many were computed in place.
    std::size_t eval_into(const param_map& params, const std::vector<argument>& outputs) const;

    // The caller-visible parameters, in declaration order (internal "#..." excluded).
    std::vector<std::string> get_parameter_names() const;
    std::unordered_map<std::string, shape> get_parameter_shapes() const;
    std::vector<shape> get_output_shapes() const;
    // Output names (from the model); "output_N" where the model gave none.
    std::vector<std::string> get_output_names() const;
    void set_output_names(std::vector<std::string> names);
    // A dynamic program: the most recently run specialization's usage (before the first
    // eval, the program compiled ahead for the default shapes', else the parsed
    // program's); get_specialization_stats() counts them.
    memory_usage get_memory_usage() const;
    // How the target ran the last eval (context::run_note: the cpu target's threads and
    // whether they ran as a team); a dynamic program's, the specialization's that ran last.
    std::string run_note() const;
    // Whether the target is still trying out how to run the evals (context::warming_up; a
    // dynamic program: the specialization that ran last). `kiln perf` warms up until false.
    bool warming_up() const;
    specialization_stats get_specialization_stats() const;
    // Frees the tensor buffers this program keeps from one eval for the next (a program with
    // instructions whose shapes are known only as they run keeps them, so that a warm run
    // allocates nothing). The next eval allocates afresh. A dynamic program calls it on its
    // generic program once specializations have served many calls in a row.
    void release_kept_buffers() const;
    // Waits until the specializations being compiled in the background are done
    // (benchmarks and tests: the calls after it run on them).
    void finish_specializations() const;

    // A value used when the caller omits the parameter (ONNX initializers that are
    // also graph inputs). Such parameters are still listed by get_parameter_names().
    void set_parameter_default(const std::string& name, literal value);
    const literal* get_parameter_default(const std::string& name) const;

    // Free-form metadata kept with the program and saved in .kiln files.
    const value& get_metadata() const;
    void set_metadata(const value& v);

    void print(std::ostream& os) const;
    std::string to_string() const;
    friend bool operator==(const program& a, const program& b) { return a.to_string() == b.to_string(); }

    // The compiled state; used by the .kiln loader and the tools.
    context& get_context() const;
    std::shared_ptr<const target> get_target() const;
    // Marks the program as compiled for `t` without running passes (used when loading
    // a saved compiled program; the ops' kernels are finalized again here).
    void restore_compiled(const target& t, const compile_options& options);
    // For dynamic programs: the program as parsed, from which each specialization is
    // compiled; nullptr otherwise.
    const program* dynamic_source() const;
    // For dynamic programs: the programs compiled at compile() for the inputs' optimals
    // (each static, or dynamic in the dims without optimals), which a .kiln saves.
    std::vector<std::shared_ptr<const program>> compiled_ahead() const;
    // compile() of this parsed dynamic program, with the programs compiled ahead taken
    // from `ahead` (a .kiln's) instead of compiled again.
    void restore_dynamic(const target& t, const compile_options& options, std::vector<program> ahead);

    struct impl;

private:
    // The passes and the finalization of compile(), for the module as it is (a dynamic
    // one becomes the generic program).
    void compile_pipeline(const target& t, const compile_options& options, std::shared_ptr<context> ctx = nullptr);
    void compile_dynamic(const target& t, const compile_options& options, std::optional<std::vector<program>> ahead,
                         std::shared_ptr<context> ctx = nullptr);
    std::vector<argument> eval_impl(const param_map& params, std::vector<instruction_profile>* profile) const;
    // eval_impl after the inputs were checked (and defaults added): a dynamic program
    // hands them to the program it chose without checking them again.
    // `destinations`: eval_into's output buffers (see exec_plan::run).
    std::vector<argument> run_checked(param_map checked, std::vector<instruction_profile>* profile,
                                      const std::vector<argument>* destinations = nullptr) const;
    std::unique_ptr<impl> impl_;
};

std::ostream& operator<<(std::ostream& os, const program& p);

// Evaluates one module with the given parameters in `ctx` (sub-modules through
// `mods` run recursively). Used by program::eval and by control-flow ops.
std::vector<argument> eval_module(const module& m, context& ctx, const param_map& params);

}  // namespace kiln
