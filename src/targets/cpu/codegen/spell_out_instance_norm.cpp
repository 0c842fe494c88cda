#include "targets/cpu/codegen/spell_out_instance_norm.hpp"

#include "ops/normalization.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/reduce.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/literal.hpp>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace kiln::cpu::codegen {

namespace {

// A [C] constant as [C, 1, ...] (rank - 1 dims), to broadcast along x's channels; nullopt
// when it is not a constant, or when it is all `identity` (nothing to apply).
std::optional<literal> per_channel(instruction_ref p, std::size_t rank, double identity) {
    auto c = rewrite::constant_of(p);
    if (!c || c->get_shape().get_type() != type::float32 || c->get_shape().ndim() != 1) return std::nullopt;
    if (rewrite::all_equal(*c, identity)) return literal{};
    std::vector<std::size_t> lens(rank - 1, 1);
    lens.front() = c->get_shape().lens().front();
    return rewrite::make_literal(shape(type::float32, lens), rewrite::values_of(*c));
}

}  // namespace

instruction_ref insert_normalization(module& m, instruction_ref pos, instruction_ref x, std::vector<std::int64_t> axes,
                                     float epsilon) {
    op::reduce_mean mean_op;
    mean_op.axes = std::move(axes);
    auto scalar = [&](float v) { return m.insert_literal(pos, literal(shape(type::float32, {}), std::vector<float>{v})); };
    auto mean = m.insert_instruction(pos, mean_op, {x});
    auto centred = m.insert_instruction(pos, op::sub_op{}, {x, mean});
    auto square = m.insert_instruction(pos, op::pow_op{}, {centred, scalar(2.0f)});
    auto var = m.insert_instruction(pos, mean_op, {square});
    auto root = m.insert_instruction(pos, op::sqrt_op{}, {m.insert_instruction(pos, op::add_op{}, {var, scalar(epsilon)})});
    return m.insert_instruction(pos, op::div_op{}, {centred, root});
}

void spell_out_instance_norm::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!rewrite::is<op::instance_norm>(ins) || ins->inputs().size() != 3) continue;
        const auto x = ins->inputs()[0];
        const auto& s = x->get_shape();
        if (!s.is_tensor() || s.get_type() != type::float32 || s.ndim() < 3) continue;
        const auto scale = per_channel(ins->inputs()[1], s.ndim(), 1.0);
        const auto bias = per_channel(ins->inputs()[2], s.ndim(), 0.0);
        if (!scale || !bias) continue;  // a computed scale or bias: rare, left to the reference
        const auto eps = ins->get_operator().get<op::instance_norm>().epsilon;
        std::vector<std::int64_t> axes;
        for (auto a = 2; a < static_cast<int>(s.ndim()); ++a) axes.push_back(a);
        auto y = insert_normalization(m, ins, x, axes, eps);
        if (!scale->empty()) y = m.insert_instruction(ins, op::mul_op{}, {y, m.insert_literal(ins, *scale)});
        if (!bias->empty()) y = m.insert_instruction(ins, op::add_op{}, {y, m.insert_literal(ins, *bias)});
        m.replace_instruction(ins, y);
        m.remove_instruction(ins);
        ins = y;  // the loop goes on after the chain
    }
}

}  // namespace kiln::cpu::codegen
