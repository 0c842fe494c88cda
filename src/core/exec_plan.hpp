// A module flattened for fast, repeated evaluation: each step knows its op, the
// slots of its inputs, and which slots die after it (so intermediate results of
// unplanned programs are freed as soon as possible).
#pragma once
#include <kiln/context.hpp>
#include <kiln/module.hpp>
#include <kiln/program.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class exec_plan {
public:
    explicit exec_plan(const module& m);
    // Runs the plan. `get_plan` supplies plans for sub-modules (control flow).
    // `profile`, when given, accumulates each op step's wall time. `destinations`, when given
    // (program::eval_into), is caller memory for the outputs: output i is computed straight into
    // destinations[i] where its buffer is a plain `allocate` of the same bytes and destinations[i]
    // is a 64-byte aligned standard host tensor of the output's type and lens (destination-passing
    // style: the op producing the output writes into that buffer); other outputs are left to the
    // caller to copy.
    std::vector<argument> run(context& ctx, const param_map& params,
                              const std::function<const exec_plan&(const module*)>& get_plan,
                              std::vector<instruction_profile>* profile = nullptr,
                              const std::vector<argument>* destinations = nullptr) const;
    // Whether some step gets its shape at run time (an instruction of a generic program).
    bool has_dynamic_steps() const;

private:
    enum class step_kind : std::uint8_t { param, literal, op, ret };
    struct step {
        step_kind kind;
        const instruction* ins;
        std::vector<std::uint32_t> inputs;
        std::vector<std::uint32_t> release;  // slots whose last use is this step
        bool dynamic = false;
        // An `allocate` whose buffer becomes output `output` (see run's destinations); -1: none.
        std::int32_t output = -1;
    };
    // The caller's buffer for step s's allocation when it fits exactly, else an empty argument.
    argument destination_for(const step& s, const std::vector<argument>& destinations) const;
    void mark_output_allocations();
    std::vector<step> steps_;
    std::string module_name_;
    std::size_t slots_ = 0;
};

}  // namespace kiln
