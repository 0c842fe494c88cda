#include <kiln/builtin_ops.hpp>
#include <kiln/instruction.hpp>

#include <algorithm>

namespace kiln {

instruction::instruction(operation op, shape s, std::vector<instruction_ref> inputs, std::vector<module_ref> mods)
    : op_(std::move(op)), shape_(std::move(s)), inputs_(std::move(inputs)), mods_(std::move(mods)) {}

instruction::instruction(literal l) : op_(builtin::literal_op{}), shape_(l.get_shape()), literal_(std::move(l)) {}

std::string instruction::param_name() const {
    if (auto* p = op_.any_cast<builtin::param>()) return p->parameter;
    return {};
}

shape instruction::recompute_shape() const {
    if (is_literal()) return literal_.get_shape();
    return op_.compute_shape(to_shapes(inputs_), mods_);
}

void instruction::add_output(instruction_ref user) {
    if (std::find(outputs_.begin(), outputs_.end(), user) == outputs_.end()) outputs_.push_back(user);
}

void instruction::remove_output(instruction_ref user) {
    outputs_.erase(std::remove(outputs_.begin(), outputs_.end(), user), outputs_.end());
}

std::vector<shape> to_shapes(const std::vector<instruction_ref>& args) {
    std::vector<shape> out;
    out.reserve(args.size());
    for (auto a : args) out.push_back(a->get_shape());
    return out;
}

}  // namespace kiln
