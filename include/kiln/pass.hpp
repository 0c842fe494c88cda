// A pass: a name and apply(module&). Pass structs stay small and each holds one idea;
// `pass` erases them so a target can list its pipeline as data.
#pragma once
#include <kiln/module.hpp>

#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln {

class program;

class pass {
public:
    template <class T>
        requires(!std::is_same_v<std::decay_t<T>, pass>)
    pass(T p)  // NOLINT: implicit, passes are listed as values
        : name_(p.name()), apply_([p = std::move(p)](module& m) { p.apply(m); }) {}

    const std::string& name() const { return name_; }
    void apply(module& m) const { apply_(m); }

private:
    std::string name_;
    std::function<void(module&)> apply_;
};

struct pass_options {
    bool validate = false;  // validate() every module after each pass
    bool trace = false;     // print the program after each pass (KILN_TRACE_PASSES=1)
    bool time = false;      // print each pass's time (KILN_TIME_PASSES=1)
};

// Options from the environment: KILN_TRACE_PASSES, KILN_TIME_PASSES, KILN_VALIDATE
// (validation is on by default in debug builds).
pass_options pass_options_from_env();

// Runs each pass over every module of the program, sub-modules before the modules
// that use them. With opts.validate, every module is validated before the first pass
// and after each pass (errors name the pass); opts.trace prints the program after each
// pass, opts.time each pass's time summed over the modules. A sub-module that a pass
// leaves unreferenced (an If folded into its taken branch) is removed from the program.
void run_passes(program& p, const std::vector<pass>& passes, const pass_options& opts = pass_options_from_env());
// Runs the passes over one module (and nothing else).
void run_passes(module& m, const std::vector<pass>& passes, const pass_options& opts = pass_options_from_env());

}  // namespace kiln
