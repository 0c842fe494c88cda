#include "targets/cpu/kernels/dynamic/dyn_lstm.hpp"

#include "targets/cpu/kernels/lstm/lstm_kernel.hpp"
#include "targets/cpu/kernels/onednn/op_rnn.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

namespace kiln::cpu {

namespace {

const lstm_packed& packed_cell(const operation& cell) {
    if (const auto* p = cell.any_cast<lstm_packed>()) return *p;
    throw_error(error_code::shape, "cpu::dyn_lstm: its cell must be a cpu::lstm_packed, got " + cell.name());
}

// Operands before the workspace: x, w, r, bias[, peep][, h0][, c0].
std::size_t operand_count(const lstm_packed& p) {
    return 4 + (p.has_peephole ? 1 : 0) + (p.has_initial_h ? 1 : 0) + (p.has_initial_c ? 1 : 0);
}

}  // namespace

shape dyn_lstm::compute_shape(const std::vector<shape>& inputs) const {
    const auto& p = packed_cell(cell);
    if (inputs.size() != operand_count(p) || !inputs[0].is_tensor() || inputs[0].ndim() != 3 ||
        inputs[0].get_type() != type::float32)
        throw_error(error_code::shape, name() + ": expected x float32 [T, N, I] and " +
                                           std::to_string(operand_count(p) - 1) + " more operands, got " +
                                           std::to_string(inputs.size()) + " operands");
    const std::size_t extra = p.final_states ? 2 : 0, D = p.directions, H = p.hidden_size;
    const auto& x = inputs[0];
    if (!x.dynamic()) return shape(type::float32, {x.lens()[0] + extra, D, x.lens()[1], H});
    const auto& d = x.dyn_dims();
    dynamic_dimension rows = d[0];
    if (extra != 0) {
        // Y's rows and the two states: a size of its own (the name would not hold).
        const auto add = [&](std::size_t v) { return v == dynamic_dimension::unbounded ? v : v + extra; };
        std::set<std::size_t> optimals;
        for (auto o : rows.optimals) optimals.insert(o + extra);
        rows = dynamic_dimension{add(rows.min), add(rows.max), optimals, {}};
    }
    const dynamic_dimension fixed_d{D, D, {}, {}}, fixed_h{H, H, {}, {}};
    return shape::make_dynamic(type::float32, {rows, fixed_d, d[1], fixed_h});
}

argument dyn_lstm::compute(context& ctx, const shape& out, const std::vector<argument>& args) const {
    const auto& p = packed_cell(cell);
    std::vector<shape> shapes;
    shapes.reserve(args.size());
    for (const auto& a : args) shapes.push_back(a.get_shape());
    const shape result = out.dynamic() ? compute_shape(shapes) : out.as_standard();
    // The kernel reads row-major activations: x and the states may come as views.
    std::vector<argument> operands;
    operands.reserve(args.size() + 2);
    for (const auto& a : args) operands.push_back(a.get_shape().standard() ? a : a.copy());
    const auto& xl = operands[0].get_shape().lens();
    const lstm_dims d{xl[0], xl[1], xl[2], p.hidden_size, p.directions, p.reverse};
    operands.push_back(argument::for_overwrite(shape(type::float32, {d.workspace()})));
    auto y = argument::for_overwrite(result);
    operands.push_back(y);
    if (result.elements() == 0) return y;
    std::vector<shape> checked;
    checked.reserve(operands.size());
    for (const auto& a : operands) checked.push_back(a.get_shape());
    p.compute_shape(checked);  // the operands' sizes against the packed weights
    cell.compute(ctx, result, operands);
    return y;
}

KILN_REGISTER_OP(dyn_lstm)

}  // namespace kiln::cpu
