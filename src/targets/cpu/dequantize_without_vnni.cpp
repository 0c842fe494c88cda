#include "targets/cpu/dequantize_without_vnni.hpp"

#include "targets/cpu/kernels/onednn/op_quant.hpp"
#include "targets/cpu/selection.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/quant_fused.hpp"
#include "ops/quantize.hpp"
#include "passes/rewrite_utils.hpp"

namespace kiln::cpu {

namespace {

instruction_ref scalar(module& m, instruction_ref pos, type t, double v) {
    return m.insert_literal(pos, rewrite::make_literal(shape(t, {}), {v}));
}

// w's float values, (w - w_zero_point) * w_scales[channel] in float as DequantizeLinear
// computes them; `channel(i)` gives element i's channel.
template <class Channel>
literal dequantized(const literal& w, const op::requantize_params& p, Channel channel) {
    auto v = rewrite::values_of(w);
    for (std::size_t i = 0; i < v.size(); ++i)
        v[i] = op::dequantize_linear_op::apply<float>(static_cast<float>(v[i]), static_cast<float>(p.w_zero_point),
                                                      p.w_scales[p.w_scales.size() == 1 ? 0 : channel(i)]);
    return literal(shape(type::float32, w.get_shape().lens()), v);
}

// The float bias: int32 in accumulator units times x_scale * w_scale, float32 as it is.
instruction_ref float_bias(module& m, instruction_ref pos, instruction_ref b, const op::requantize_params& p) {
    auto v = rewrite::values_of(b->get_literal());
    if (b->get_shape().get_type() == type::int32)
        for (std::size_t c = 0; c < v.size(); ++c)
            v[c] = static_cast<float>(static_cast<float>(v[c]) * p.channel_scale(c));
    return m.insert_literal(pos, rewrite::make_literal(shape(type::float32, {v.size()}), v));
}

// [Clip ->] QuantizeLinear of the float result y, replacing `ins`; or y itself.
void finish(module& m, instruction_ref ins, instruction_ref y, const op::requantize_params& p) {
    if (!p.quantized_output()) {
        m.replace_instruction(ins, y);
        m.remove_instruction(ins);
        return;
    }
    const std::int64_t lo = p.out_type == type::int8 ? -128 : 0, hi = p.out_type == type::int8 ? 127 : 255;
    if (p.y_min > lo || p.y_max < hi) {
        // The saturation range in float: Q of these bounds gives y_min and y_max back.
        auto a = scalar(m, ins, type::float32, static_cast<float>(p.y_min - p.y_zero_point) * p.y_scale);
        auto b = scalar(m, ins, type::float32, static_cast<float>(p.y_max - p.y_zero_point) * p.y_scale);
        y = m.insert_instruction(ins, op::clip_op{}, {y, a, b});
    }
    auto s = scalar(m, ins, type::float32, p.y_scale);
    auto z = scalar(m, ins, p.out_type, static_cast<double>(p.y_zero_point));
    op::quantize_linear_op q;
    q.output_type = p.out_type;
    m.replace_instruction(ins, q, {y, s, z});
}

instruction_ref dequantize_x(module& m, instruction_ref ins, const op::requantize_params& p) {
    auto x = ins->inputs()[0];
    auto s = scalar(m, ins, type::float32, p.x_scale);
    auto z = scalar(m, ins, x->get_shape().get_type(), static_cast<double>(p.x_zero_point));
    return m.insert_instruction(ins, op::dequantize_linear_op{}, {x, s, z});
}

// y + DequantizeLinear(r) for a convolution with a residual r; y itself otherwise.
instruction_ref add_residual(module& m, instruction_ref ins, instruction_ref y, const op::quant_convolution& q) {
    if (!q.has_residual) return y;
    auto r = ins->inputs()[q.residual_index()];
    auto s = scalar(m, ins, type::float32, q.r_scale);
    auto z = scalar(m, ins, r->get_shape().get_type(), static_cast<double>(q.r_zero_point));
    auto dr = m.insert_instruction(ins, op::dequantize_linear_op{}, {r, s, z});
    return m.insert_instruction(ins, op::add_op{}, {y, dr});
}

void unfuse_convolution(module& m, instruction_ref ins, const cpu_options& options) {
    const auto q = ins->get_operator().get<op::quant_convolution>();
    auto w = ins->inputs()[1];
    if (!w->is_literal()) return;
    if (q.has_residual) {
        // Kiln's exact int8 kernels take no residual: the product without it, to float32,
        // on one of them where it fits, then DequantizeLinear(r), the add, [Clip,] Q.
        auto p = q;
        p.has_residual = false;
        p.out_type = type::float32;
        p.y_scale = 1.0f;
        p.y_zero_point = p.y_min = p.y_max = 0;
        auto args = ins->inputs();
        args.erase(args.begin() + static_cast<std::ptrdiff_t>(q.residual_index()));
        auto product = m.insert_instruction(ins, p, args);
        if (own_int8_kernel_for(m, product, options)) {
            finish(m, ins, add_residual(m, ins, product, q), q);
            return;
        }
        m.remove_instruction(product);
    }
    const std::size_t per = w->get_shape().elements() / w->get_shape().lens()[0];
    auto wf = m.insert_literal(ins, dequantized(w->get_literal(), q, [&](std::size_t i) { return i / per; }));
    std::vector<instruction_ref> args{dequantize_x(m, ins, q), wf};
    if (q.has_bias) args.push_back(float_bias(m, ins, ins->inputs()[2], q));
    op::convolution c;
    static_cast<op::conv_attributes&>(c) = q;
    finish(m, ins, add_residual(m, ins, m.insert_instruction(ins, c, args), q), q);
}

void unfuse_dot(module& m, instruction_ref ins) {
    const auto q = ins->get_operator().get<op::quant_dot>();
    auto b = ins->inputs()[1];
    instruction_ref bf;
    if (b->is_literal()) {
        const std::size_t n = b->get_shape().lens().back();
        bf = m.insert_literal(ins, dequantized(b->get_literal(), q, [&](std::size_t i) { return i % n; }));
    } else {
        if (q.w_scales.size() != 1) return;
        auto s = scalar(m, ins, type::float32, q.w_scales[0]);
        auto z = scalar(m, ins, b->get_shape().get_type(), static_cast<double>(q.w_zero_point));
        bf = m.insert_instruction(ins, op::dequantize_linear_op{}, {b, s, z});
    }
    auto y = m.insert_instruction(ins, op::matmul{}, {dequantize_x(m, ins, q), bf});
    if (q.has_bias) y = m.insert_instruction(ins, op::add_op{}, {y, float_bias(m, ins, ins->inputs()[2], q)});
    finish(m, ins, y, q);
}

}  // namespace

void dequantize_without_vnni::apply(module& m) const {
    if (has_int8_dot_product()) return;
    std::vector<instruction_ref> fused;
    for (auto it = m.begin(); it != m.end(); ++it)
        if ((rewrite::is<op::quant_convolution>(it) || rewrite::is<op::quant_dot>(it)) && !it->get_shape().dynamic() &&
            !own_int8_kernel_for(m, it, options))
            fused.push_back(it);
    for (auto ins : fused) {
        if (rewrite::is<op::quant_convolution>(ins)) unfuse_convolution(m, ins, options);
        else unfuse_dot(m, ins);
    }
}

}  // namespace kiln::cpu
