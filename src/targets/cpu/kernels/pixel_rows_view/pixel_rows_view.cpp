#include "targets/cpu/kernels/pixel_rows_view/pixel_rows_view.hpp"

#include "ops/tensor_views.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <string>

namespace kiln::cpu {

namespace {

// A dense channels-last layout with one block of all channels (acdb), no padding.
bool channels_last(const md_record& r) { return r.dims.size() == 4 && pixel_channels(r) == r.dims[1]; }

}  // namespace

shape pixel_rows_view::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 1) bad("expected one input, got " + std::to_string(inputs.size()));
    const shape& x = inputs[0];
    if (!x.is_tensor() || x.dynamic() || x.ndim() != 4 || x.get_type() != type::float32 || !channels_last(layout) ||
        to_dims(x.lens()) != dnnl::memory::dims(layout.dims.begin(), layout.dims.end()))
        bad("x " + x.to_string() + " is not a float32 NCHW tensor in its recorded channels-last layout");
    const auto& l = x.lens();
    return shape(type::float32, {l[0], l[2] * l[3], l[1]});
}

argument pixel_rows_view::compute(context&, const shape& out, const std::vector<argument>& args) const {
    return args[0].reshape(out);
}

bool lower_pixel_rows_view(lower_env& env, instruction_ref ins) {
    const auto* tr = ins->get_operator().any_cast<op::transpose>();
    if (!tr || tr->perm != std::vector<std::int64_t>{0, 2, 1} || ins->inputs().size() != 1) return false;
    auto r = ins->inputs()[0];
    if ((!r->get_operator().any_cast<op::reshape>() && !r->get_operator().any_cast<op::flatten>()) ||
        r->inputs().size() != 1)
        return false;
    auto x = r->inputs()[0];
    auto it = env.layout.find(&*x);
    if (it == env.layout.end() || !channels_last(it->second)) return false;
    const auto& xs = x->get_shape();
    if (!xs.is_tensor() || xs.dynamic() || xs.ndim() != 4 || xs.get_type() != type::float32) return false;
    const auto& l = xs.lens();
    if (r->get_shape().lens() != std::vector<std::size_t>{l[0], l[1], l[2] * l[3]}) return false;
    pixel_rows_view op;
    op.layout = it->second;
    env.m.replace_instruction(ins, op, {x});
    return true;
}

KILN_REGISTER_OP(pixel_rows_view)

}  // namespace kiln::cpu
