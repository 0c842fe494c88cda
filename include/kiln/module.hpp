// An ordered list of SSA instructions with parameters, literals and one @return.
// Control flow (If, Loop, Scan) refers to other modules of the same program.
#pragma once
#include <kiln/instruction.hpp>

#include <iosfwd>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

class module {
public:
    explicit module(std::string name = "main");
    module(const module&) = delete;
    module& operator=(const module&) = delete;

    const std::string& name() const { return name_; }

    instruction_ref add_parameter(const std::string& name, const shape& s);
    instruction_ref add_literal(literal l);
    instruction_ref add_instruction(const operation& op, std::vector<instruction_ref> args,
                                    std::vector<module_ref> mods = {});
    instruction_ref add_return(std::vector<instruction_ref> args);

    instruction_ref insert_instruction(instruction_ref pos, const operation& op, std::vector<instruction_ref> args,
                                       std::vector<module_ref> mods = {});
    // Inserts with a given result shape instead of computing it (the .kiln loader
    // restores lowered modules whose shapes are final); validate() checks it later.
    instruction_ref insert_instruction_with_shape(instruction_ref pos, const operation& op, shape s,
                                                  std::vector<instruction_ref> args,
                                                  std::vector<module_ref> mods = {});
    instruction_ref insert_literal(instruction_ref pos, literal l);
    instruction_ref insert_parameter(instruction_ref pos, const std::string& name, const shape& s);

    // Gives `ins` a new op and inputs in place; its users see the new value. When its
    // shape changes, users' shapes are recomputed too.
    instruction_ref replace_instruction(instruction_ref ins, const operation& op, std::vector<instruction_ref> args,
                                        std::vector<module_ref> mods = {});
    // Makes every user of `ins` (and the @return) use `rep` instead; `ins` stays until
    // dead-code elimination removes it. Returns rep.
    instruction_ref replace_instruction(instruction_ref ins, instruction_ref rep);
    // Replaces one input of `ins`.
    void replace_argument(instruction_ref ins, instruction_ref old_arg, instruction_ref new_arg);
    // Removes an instruction that has no users.
    instruction_ref remove_instruction(instruction_ref ins);
    // Moves `src` to just before `dst`.
    instruction_ref move_instruction(instruction_ref src, instruction_ref dst);
    // Changes a parameter's shape (recomputing the shapes of everything that depends on it).
    void set_parameter_shape(const std::string& name, const shape& s);
    // Changes several at once, then recomputes every shape in one pass in order: inputs that
    // share a named dim ("past") change together, so no instruction sees a mix of old and
    // new sizes (which set_parameter_shape one at a time would show it).
    void set_parameter_shapes(const std::unordered_map<std::string, shape>& shapes);

    instruction_ref begin() { return instructions_.begin(); }
    instruction_ref end() { return instructions_.end(); }
    std::list<instruction>::const_iterator begin() const { return instructions_.begin(); }
    std::list<instruction>::const_iterator end() const { return instructions_.end(); }
    std::size_t size() const { return instructions_.size(); }
    bool has_instruction(instruction_ref ins) const;
    // Position of an instruction in the list (O(n)).
    std::size_t index_of(instruction_ref ins) const;

    instruction_ref get_parameter(const std::string& name);  // end() when missing
    std::vector<std::string> get_parameter_names() const;    // in order of appearance
    std::unordered_map<std::string, shape> get_parameter_shapes() const;
    instruction_ref get_return();  // end() when the module has no @return
    std::vector<shape> get_output_shapes() const;

    // Lets every op build its kernels for `ctx` (operation::finalize), once, at the end
    // of compilation and after loading a compiled program.
    void finalize_ops(context& ctx);

    // Checks SSA order, use lists, shapes and the single @return; throws a kiln
    // runtime error describing the first broken invariant.
    void validate() const;

    // Copies this module's instructions into `dst` (empty or not), mapping module
    // references through `mod_map` (nullptr keeps them). Returns the instruction map.
    std::unordered_map<const instruction*, instruction_ref> copy_into(
        module& dst, const std::unordered_map<const module*, module_ref>* mod_map = nullptr) const;

    // Text form: one line per instruction, e.g.
    //   @2 = add(x, @1) -> float32[2, 3]
    void print(std::ostream& os) const;
    std::string to_string() const;
    // Name of an instruction in the text form (@N, or the parameter name).
    std::string instruction_name(const instruction* ins) const;
    friend bool operator==(const module& a, const module& b) { return a.to_string() == b.to_string(); }
    friend bool operator!=(const module& a, const module& b) { return !(a == b); }

private:
    instruction_ref insert(instruction_ref pos, instruction ins);
    void recompute_users(instruction_ref ins);
    std::string name_;
    std::list<instruction> instructions_;
};

std::ostream& operator<<(std::ostream& os, const module& m);

}  // namespace kiln
