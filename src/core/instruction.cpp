#include <kiln/builtin_ops.hpp>
#include <kiln/instruction.hpp>

#include <algorithm>

namespace kiln {

instruction::instruction(operation op, shape s, std::vector<instruction_ref> inputs, std::vector<module_ref> mods)
    : op_(std::move(op)), shape_(std::move(s)), inputs_(std::move(inputs)), mods_(std::move(mods)) {}

namespace {

// A small integer (or bool) literal's shape carries its values, so that shape arithmetic mixing
// constants with named dims (Concat(batch, [4, 16])) is known at compile time.
shape literal_shape(const literal& l) {
    const auto& s = l.get_shape();
    if (!s.is_tensor() || s.dynamic() ||
        (s.get_type() != type::int64 && s.get_type() != type::int32 && s.get_type() != type::bool_) ||
        s.elements() == 0 || s.elements() > shape::max_valued_elements)
        return s;
    std::vector<std::string> values;
    const auto& a = l.get_argument();
    for (std::size_t i = 0; i < s.elements(); ++i) values.push_back(std::to_string(a.get_int64(i)));
    return s.with_values(std::move(values));
}

}  // namespace

instruction::instruction(literal l) : op_(builtin::literal_op{}), shape_(literal_shape(l)), literal_(std::move(l)) {}

std::string instruction::param_name() const {
    if (auto* p = op_.any_cast<builtin::param>()) return p->parameter;
    return {};
}

shape instruction::recompute_shape() const {
    if (is_literal()) return literal_shape(literal_);
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
