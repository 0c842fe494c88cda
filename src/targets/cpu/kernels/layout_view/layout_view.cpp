#include "targets/cpu/kernels/layout_view/layout_view.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <string>

namespace kiln::cpu {

shape layout_view::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 1) bad("expected one input, got " + std::to_string(inputs.size()));
    const shape& x = inputs[0];
    if (!x.is_tensor() || x.dynamic() || !x.standard() || !md_record::representable(layout.to_md()) ||
        layout.to_md() != md_of(x))
        bad("x " + x.to_string() + " does not hold the bytes of its recorded layout");
    return x;
}

argument layout_view::compute(context&, const shape&, const std::vector<argument>& args) const { return args[0]; }

std::optional<instruction_ref> lower_layout_view(lower_env& env, instruction_ref pos, instruction_ref x,
                                                 const dnnl::memory::desc& want) {
    if (in_dnnl_layout(env, x) || !md_record::representable(want)) return std::nullopt;
    const shape& s = x->get_shape();
    if (!s.is_tensor() || s.dynamic() || !s.standard() || md_of(s) != want) return std::nullopt;
    layout_view op;
    op.layout = md_record::from(want);
    auto r = env.m.insert_instruction(pos, op, {x});
    env.layout[&*r] = op.layout;
    return r;
}

KILN_REGISTER_OP(layout_view)

}  // namespace kiln::cpu
