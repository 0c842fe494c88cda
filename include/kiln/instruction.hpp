// One SSA instruction: an operation, its operand instructions, its users and its
// result shape. Instructions live in a module's list; `instruction_ref` is a stable
// iterator into it. Only the module mutates instructions, so use lists stay in sync.
#pragma once
#include <kiln/literal.hpp>
#include <kiln/operation.hpp>

#include <list>
#include <string>
#include <vector>

namespace kiln {

class instruction;
using instruction_ref = std::list<instruction>::iterator;

class instruction {
public:
    instruction(operation op, shape s, std::vector<instruction_ref> inputs, std::vector<module_ref> mods);
    instruction(literal l);

    const operation& get_operator() const { return op_; }
    std::string name() const { return op_.name(); }
    const shape& get_shape() const { return shape_; }
    const std::vector<instruction_ref>& inputs() const { return inputs_; }
    const std::vector<instruction_ref>& outputs() const { return outputs_; }
    const std::vector<module_ref>& module_inputs() const { return mods_; }
    const literal& get_literal() const { return literal_; }

    bool is_param() const { return op_.name() == "@param"; }
    bool is_literal() const { return op_.name() == "@literal"; }
    bool is_return() const { return op_.name() == "@return"; }
    // Parameter name for @param instructions, empty otherwise.
    std::string param_name() const;

    // Recomputes this instruction's shape from its inputs' shapes (throws when invalid).
    shape recompute_shape() const;

private:
    friend class module;
    void add_output(instruction_ref user);
    void remove_output(instruction_ref user);

    operation op_;
    shape shape_;
    std::vector<instruction_ref> inputs_;
    std::vector<instruction_ref> outputs_;
    std::vector<module_ref> mods_;
    literal literal_;
};

// Shapes of a list of instructions.
std::vector<shape> to_shapes(const std::vector<instruction_ref>& args);

}  // namespace kiln
