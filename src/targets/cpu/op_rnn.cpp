#include "targets/cpu/op_rnn.hpp"

#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/post_ops.hpp"

#include "ops/control_rnn.hpp"

#include <kiln/register_op.hpp>

namespace kiln::cpu {

namespace {

constexpr std::size_t gates = 4;
// oneDNN's gate g (i, f, c~, o) is ONNX's gate onnx_gate[g] (ONNX order: i, o, f, c).
constexpr std::size_t onnx_gate[gates] = {0, 2, 3, 1};

dnnl::memory::desc with_any(const dnnl::memory::desc& md) {
    return dnnl::memory::desc(md.dims(), md.data_type(), dnnl::memory::format_tag::any);
}

}  // namespace

shape lstm::logical_shape(const std::vector<shape>& operands) const {
    const std::size_t want = 4 + (has_initial_h ? 1 : 0) + (has_initial_c ? 1 : 0);
    if (operands.size() != want)
        throw_error(error_code::shape, name() + ": expected " + std::to_string(want) + " operands, got " +
                                           std::to_string(operands.size()));
    const auto& x = operands[0];
    if (x.ndim() != 3 || x.get_type() != type::float32 || hidden_size == 0)
        throw_error(error_code::shape, name() + ": x must be float32 [T, N, I], got " + x.to_string());
    const auto& l = x.lens();
    return shape(type::float32, {l[0], 1, l[1], hidden_size});
}

dnnl::primitive_desc_base lstm::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                        const shape& dst) const {
    expect_plain();
    const auto& l = operands.at(0).lens();
    using md = dnnl::memory::desc;
    const auto f32 = dnnl::memory::data_type::f32;
    const auto T = static_cast<dnnl::memory::dim>(l[0]), N = static_cast<dnnl::memory::dim>(l[1]);
    const auto H = static_cast<dnnl::memory::dim>(hidden_size);
    std::size_t next = 4;
    md h0 = has_initial_h ? md_with_rank(operands.at(next++), 4) : md();
    md c0 = has_initial_c ? md_with_rank(operands.at(next++), 4) : md();
    md out({T, N, H}, f32, dnnl::memory::format_tag::tnc);
    if (dst.elements() != static_cast<std::size_t>(T * N * H) || !dst.standard())
        throw_error(error_code::shape, name() + ": output buffer " + dst.to_string() + " must be row-major");
    dnnl::lstm_forward::desc d(dnnl::prop_kind::forward_inference,
                               reverse ? dnnl::rnn_direction::unidirectional_right2left
                                       : dnnl::rnn_direction::unidirectional_left2right,
                               md_of(operands.at(0)), h0, c0, with_any(md_of(operands.at(1))),
                               with_any(md_of(operands.at(2))), md_of(operands.at(3)), out, md(), md());
    return dnnl::lstm_forward::primitive_desc(d, make_attr({}, operands, 3), eng);
}

void lstm::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                         const std::vector<argument>& constants, const dnnl::engine& eng) const {
    k.bind(DNNL_ARG_SRC_LAYER, 0, pd.src_desc(0));
    // Weights are stored plain (ldigo); the primitive packs them its way, once, here.
    bind_constant_weights(k, md_record::from(md_of(operands[1])), pd.weights_desc(0), 1, constants, eng, name(),
                          DNNL_ARG_WEIGHTS_LAYER);
    bind_constant_weights(k, md_record::from(md_of(operands[2])), pd.weights_desc(1), 2, constants, eng, name(),
                          DNNL_ARG_WEIGHTS_ITER);
    k.bind(DNNL_ARG_BIAS, 3, md_of(operands[3]));
    std::size_t next = 4;
    if (has_initial_h) {
        k.bind(DNNL_ARG_SRC_ITER, next, md_with_rank(operands[next], 4));
        ++next;
    }
    if (has_initial_c) k.bind(DNNL_ARG_SRC_ITER_C, next, md_with_rank(operands[next], 4));
}

bool lower_lstm(lower_env& env, instruction_ref ins, std::vector<instruction_ref>& dead) {
    const auto* a = ins->get_operator().any_cast<op::lstm>();
    if (!a || a->direction == 2 || a->layout != 0 || a->clip != 0 || a->input_forget || a->has_peephole ||
        a->has_sequence_lens)
        return false;
    const std::vector<std::string> defaults{"Sigmoid", "Tanh", "Tanh"};
    if (!a->activations.empty() && a->activations != defaults) return false;
    const auto& in = ins->inputs();
    auto x = plain(env, in.at(0)), w = in.at(1), r = in.at(2);
    std::size_t next = 3;
    std::optional<instruction_ref> b, h0, c0;
    if (a->has_bias) b = in.at(next++);
    if (a->has_initial_h) h0 = plain(env, in.at(next++));
    if (a->has_initial_c) c0 = plain(env, in.at(next++));
    auto f32 = [](instruction_ref i) {
        const auto& s = i->get_shape();
        return s.is_tensor() && !s.dynamic() && s.get_type() == type::float32 && s.elements() > 0;
    };
    if (!f32(x) || !w->is_literal() || !r->is_literal() || !f32(w) || !f32(r) || (b && (!(*b)->is_literal() || !f32(*b))))
        return false;
    if ((h0 && !f32(*h0)) || (c0 && !f32(*c0)) || x->get_shape().ndim() != 3) return false;
    // Only Y may be used: oneDNN does not write the final states here.
    std::optional<instruction_ref> y;
    for (auto u : ins->outputs()) {
        if (u->name() != "get_tuple_elem") return false;
        const auto index = u->get_operator().to_value().at("index").get_int64();
        if (index == 0) y = u;
        else if (!u->outputs().empty()) return false;
    }
    if (!y) return false;
    const std::size_t H = a->hidden_size, I = x->get_shape().lens()[2];
    auto wv = w->get_literal().to_vector<float>();
    auto rv = r->get_literal().to_vector<float>();
    if (wv.size() != gates * H * I || rv.size() != gates * H * H) return false;
    std::vector<float> wl(I * gates * H), wi(H * gates * H), bias(gates * H, 0.0f);
    for (std::size_t g = 0; g < gates; ++g)
        for (std::size_t h = 0; h < H; ++h) {
            const std::size_t row = onnx_gate[g] * H + h;
            for (std::size_t c = 0; c < I; ++c) wl[(c * gates + g) * H + h] = wv[row * I + c];
            for (std::size_t c = 0; c < H; ++c) wi[(c * gates + g) * H + h] = rv[row * H + c];
        }
    if (b) {
        auto bv = (*b)->get_literal().to_vector<float>();
        if (bv.size() != 2 * gates * H) return false;
        for (std::size_t g = 0; g < gates; ++g)
            for (std::size_t h = 0; h < H; ++h)
                bias[g * H + h] = bv[onnx_gate[g] * H + h] + bv[gates * H + onnx_gate[g] * H + h];
    }
    auto& m = env.m;
    std::vector<instruction_ref> operands{
        x, m.insert_literal(*y, literal(shape(type::float32, {1, 1, I, gates, H}), wl)),
        m.insert_literal(*y, literal(shape(type::float32, {1, 1, H, gates, H}), wi)),
        m.insert_literal(*y, literal(shape(type::float32, {1, 1, gates, H}), bias))};
    if (h0) operands.push_back(*h0);
    if (c0) operands.push_back(*c0);
    lstm op;
    op.hidden_size = H;
    op.reverse = a->direction == 1;
    op.has_initial_h = h0.has_value();
    op.has_initial_c = c0.has_value();
    if (!emit(env, *y, op, operands, (*y)->get_shape().as_standard())) return false;
    for (auto u : std::vector<instruction_ref>(ins->outputs()))
        if (u != *y) dead.push_back(u);
    dead.push_back(ins);
    return true;
}

KILN_REGISTER_OP(lstm)

}  // namespace kiln::cpu
