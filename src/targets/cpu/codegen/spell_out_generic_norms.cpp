#include "targets/cpu/codegen/spell_out_generic_norms.hpp"
#include "targets/cpu/codegen/spell_out_instance_norm.hpp"

#include "ops/normalization.hpp"
#include "ops/pointwise_binary.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/literal.hpp>

#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::cpu::codegen {

namespace {

bool dynamic_f32(instruction_ref x) {
    const auto& s = x->get_shape();
    return s.is_tensor() && s.dynamic() && s.get_type() == type::float32;
}

// A float32 constant's values, or nothing.
std::optional<std::vector<double>> constant_values(instruction_ref p) {
    auto c = rewrite::constant_of(p);
    if (!c || c->get_shape().get_type() != type::float32) return std::nullopt;
    return rewrite::values_of(*c);
}

// x * a + b per channel (dim 1) from the constant statistics; false when one is computed.
bool spell_out_batch_norm(module& m, instruction_ref ins) {
    const auto& in = ins->inputs();
    const auto x = in[0];
    const auto rank = x->get_shape().ndim();
    if (in.size() != 5 || rank < 2) return false;
    std::vector<std::vector<double>> v;  // scale, bias, mean, var
    for (std::size_t i = 1; i < 5; ++i) {
        auto c = constant_values(in[i]);
        if (!c || in[i]->get_shape().ndim() != 1) return false;
        v.push_back(std::move(*c));
    }
    const std::size_t channels = v[0].size();
    for (const auto& c : v)
        if (c.size() != channels) return false;
    const double eps = ins->get_operator().get<op::batch_norm_inference>().epsilon;
    std::vector<double> a(channels), b(channels);
    for (std::size_t c = 0; c < channels; ++c) {
        a[c] = v[0][c] / std::sqrt(v[3][c] + eps);
        b[c] = v[1][c] - v[2][c] * a[c];
    }
    // [C, 1, ...]: broadcast along x's dim 1.
    std::vector<std::size_t> lens(rank - 1, 1);
    lens.front() = channels;
    const shape per_channel(type::float32, lens);
    auto y = m.insert_instruction(ins, op::mul_op{}, {x, m.insert_literal(ins, rewrite::make_literal(per_channel, a))});
    y = m.insert_instruction(ins, op::add_op{}, {y, m.insert_literal(ins, rewrite::make_literal(per_channel, b))});
    m.replace_instruction(ins, y);
    return true;
}

// The normalization over axes axis..rank-1, then the constant scale and bias.
bool spell_out_layer_norm(module& m, instruction_ref ins) {
    const auto& in = ins->inputs();
    const auto x = in[0];
    const auto rank = static_cast<std::int64_t>(x->get_shape().ndim());
    const auto& attrs = ins->get_operator().get<op::layer_norm>();
    const std::int64_t axis = attrs.axis < 0 ? attrs.axis + rank : attrs.axis;
    if (axis < 0 || axis >= rank) return false;
    // Scale and bias: constants (ones and zeros are left out).
    std::optional<literal> scale, bias;
    for (std::size_t i = 1; i < in.size(); ++i) {
        auto c = rewrite::constant_of(in[i]);
        if (!c || c->get_shape().get_type() != type::float32) return false;
        if (!rewrite::all_equal(*c, i == 1 ? 1.0 : 0.0)) (i == 1 ? scale : bias) = *c;
    }
    std::vector<std::int64_t> axes;
    for (auto a = axis; a < rank; ++a) axes.push_back(a);
    auto y = insert_normalization(m, ins, x, axes, attrs.epsilon);
    if (scale) y = m.insert_instruction(ins, op::mul_op{}, {y, m.insert_literal(ins, *scale)});
    if (bias) y = m.insert_instruction(ins, op::add_op{}, {y, m.insert_literal(ins, *bias)});
    m.replace_instruction(ins, y);
    return true;
}

}  // namespace

void spell_out_generic_norms::apply(module& m) const {
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (ins->inputs().empty() || !dynamic_f32(ins->inputs()[0])) continue;
        const bool bn = rewrite::is<op::batch_norm_inference>(ins), ln = rewrite::is<op::layer_norm>(ins);
        if (!bn && !ln) continue;
        if (!(bn ? spell_out_batch_norm(m, ins) : spell_out_layer_norm(m, ins))) continue;  // left to the reference
        const auto y = std::prev(ins);  // the chain's last op, just before
        m.remove_instruction(ins);
        ins = y;  // the loop goes on after the chain
    }
}

}  // namespace kiln::cpu::codegen
