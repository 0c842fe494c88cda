#include "targets/cpu/kernels/dynamic/dyn_concat.hpp"

#include "targets/cpu/kernels/dynamic/memory_order.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <omp.h>

namespace kiln::cpu {

shape dyn_concat::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.empty() || !inputs[0].is_tensor())
        throw_error(error_code::shape, name() + ": expected one or more tensors");
    const auto a = static_cast<std::size_t>(axis);
    const auto rank = inputs[0].ndim();
    for (const auto& s : inputs)
        if (!s.is_tensor() || s.ndim() != rank || a >= rank || s.get_type() != inputs[0].get_type())
            throw_error(error_code::shape, name() + ": inputs of one type and rank above the axis " +
                                               std::to_string(axis) + ", got " + s.to_string());
    const bool dynamic = std::any_of(inputs.begin(), inputs.end(), [](const shape& s) { return s.dynamic(); });
    if (!dynamic) {
        auto lens = inputs[0].lens();
        lens[a] = 0;
        for (const auto& s : inputs) lens[a] += s.lens()[a];
        return shape(inputs[0].get_type(), lens);
    }
    // Static inputs beside dynamic ones (a KV cache's step) as fixed ranges.
    auto dims = inputs[0].to_dynamic_dims();
    dynamic_dimension along{0, 0, {}, {}};
    for (const auto& s : inputs) {
        const auto d = s.to_dynamic_dims()[a];
        along.min += d.min;
        along.max = along.max == dynamic_dimension::unbounded || d.max == dynamic_dimension::unbounded
                        ? dynamic_dimension::unbounded
                        : along.max + d.max;
    }
    dims[a] = along;
    return shape::make_dynamic(inputs[0].get_type(), dims);
}

argument dyn_concat::compute(context&, const shape&, const std::vector<argument>& args) const {
    std::vector<shape> shapes;
    shapes.reserve(args.size());
    for (const auto& x : args) shapes.push_back(x.get_shape());
    const auto lens = compute_shape(shapes).lens();
    const auto a = static_cast<std::size_t>(axis);
    // Every input stored in one order: the result in it too, else row-major.
    auto order = memory_order(shapes[0]);
    for (const auto& s : shapes)
        if (order.empty() || !stored_in(s, order)) {
            order.clear();
            break;
        }
    const bool blocks = !order.empty();
    if (!blocks) {
        order.resize(lens.size());
        std::iota(order.begin(), order.end(), std::size_t{0});
    }
    const shape result(shapes[0].get_type(), lens, strides_in(lens, order));
    auto y = argument::for_overwrite(result);
    if (result.elements() == 0) return y;
    const std::size_t bytes = result.type_size();
    if (!blocks) {
        // Each input into its part of the row-major result, element-wise through its strides.
        std::size_t at = 0;
        for (const auto& x : args) {
            const auto& s = x.get_shape();
            if (s.elements() != 0) x.copy_to(y.view(shape(s.get_type(), s.lens(), result.strides()), at * result.strides()[a] * bytes));
            at += s.lens()[a];
        }
        return y;
    }
    // In memory order: the dims stored before the axis are `outer` blocks; an input's block
    // is its extent along the axis times everything stored after it.
    const auto k = static_cast<std::size_t>(std::find(order.begin(), order.end(), a) - order.begin());
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < k; ++i) outer *= lens[order[i]];
    for (std::size_t i = k + 1; i < order.size(); ++i) inner *= lens[order[i]];
    const std::size_t row = lens[a] * inner * bytes;
    std::vector<std::size_t> offset(args.size() + 1, 0);
    for (std::size_t i = 0; i < args.size(); ++i) offset[i + 1] = offset[i] + shapes[i].lens()[a] * inner * bytes;
    char* out = y.data();
    const auto n_in = args.size();
    const auto tasks = static_cast<std::int64_t>(outer * n_in);
#pragma omp parallel for schedule(static) if (result.elements() * bytes > (std::size_t{1} << 18) && tasks > 1)
    for (std::int64_t t = 0; t < tasks; ++t) {
        const std::size_t o = static_cast<std::size_t>(t) / n_in, i = static_cast<std::size_t>(t) % n_in;
        const std::size_t block = offset[i + 1] - offset[i];
        if (block != 0) std::memcpy(out + o * row + offset[i], args[i].data() + o * block, block);
    }
    return y;
}

bool lower_dyn_concat(lower_env& env, instruction_ref ins) {
    const auto& s = ins->get_shape();
    if (!s.is_tensor() || !s.dynamic() || s.ndim() == 0 || s.get_type() == type::string) return false;
    auto axis = ins->get_operator().to_value().at("axis").get_int64();
    const auto rank = static_cast<std::int64_t>(s.ndim());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank || ins->inputs().empty()) return false;
    std::vector<instruction_ref> operands;
    for (auto x : ins->inputs()) {
        if (!x->get_shape().is_tensor()) return false;
        operands.push_back(plain(env, x));  // a value in one of oneDNN's layouts: reordered first
    }
    dyn_concat op;
    op.axis = axis;
    env.m.replace_instruction(ins, op, operands);
    return true;
}

KILN_REGISTER_OP(dyn_concat)

}  // namespace kiln::cpu
