#include "targets/ref/lowering.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/register_op.hpp>

namespace kiln::ref {

shape kernel::compute_shape(std::vector<shape> inputs, const std::vector<module_ref>& mods) const {
    if (inputs.empty()) throw_error(error_code::shape, "ref::kernel: missing its output buffer");
    auto buffer = inputs.back();
    inputs.pop_back();
    auto s = op.compute_shape(inputs, mods);
    if (!s.same_lens_and_type(buffer))
        throw_error(error_code::shape, "ref::kernel(" + op.name() + "): output " + s.to_string() +
                                           " does not fit its buffer " + buffer.to_string());
    return buffer;
}

argument kernel::compute(context& ctx, const shape& out, const std::vector<argument>& args) const {
    std::vector<argument> inputs(args.begin(), args.end() - 1);
    std::vector<shape> shapes;
    for (auto& a : inputs) shapes.push_back(a.get_shape());
    auto result = op.compute(ctx, op.compute_shape(shapes), inputs);
    const auto& dest = args.back();
    result.copy_to(dest);
    return dest.reshape(out);
}

void kernel::finalize(context& ctx, const shape& out, const std::vector<shape>& inputs,
                      const std::vector<argument>& constants) {
    // Without the output buffer (the last input).
    const std::vector<shape> in(inputs.begin(), inputs.empty() ? inputs.end() : inputs.end() - 1);
    std::vector<argument> known;
    if (constants.size() == inputs.size() && !constants.empty()) known.assign(constants.begin(), constants.end() - 1);
    op.finalize(ctx, out, in, known);
}

void lowering::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        const auto& op = ins->get_operator();
        const auto& s = ins->get_shape();
        if (op.traits().builtin || ins->is_param() || ins->is_literal() || ins->is_return()) continue;
        if (op.any_cast<kernel>() || op.any_cast<builtin::get_tuple_elem>()) continue;
        // Control flow, views, dynamic or non-tensor results keep the generic compute.
        if (!ins->module_inputs().empty() || !s.is_tensor() || s.dynamic()) continue;
        // Shape arithmetic of a dynamic program (values that follow from its named dims)
        // keeps the generic compute too: its users infer their shapes from those values.
        if (s.has_values()) continue;
        if (op.output_alias(to_shapes(ins->inputs())) >= 0) continue;
        if (op.traits().nondeterministic && op.traits().side_effects) continue;
        auto buffer = m.insert_instruction(ins, builtin::allocate{s.as_standard()}, {});
        auto args = ins->inputs();
        args.push_back(buffer);
        m.replace_instruction(ins, kernel{op}, args);
    }
}

KILN_REGISTER_OP(kernel)

}  // namespace kiln::ref
