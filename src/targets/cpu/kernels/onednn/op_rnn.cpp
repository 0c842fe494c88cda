#include "targets/cpu/kernels/onednn/op_rnn.hpp"

#include "targets/cpu/kernels/dynamic/dyn_lstm.hpp"
#include "targets/cpu/kernels/dynamic/dyn_recurrent.hpp"

#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/lstm/lstm_kernel.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include "ops/control_rnn.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"

#include <kiln/register_op.hpp>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace kiln::cpu {

namespace {

constexpr std::size_t gates = 4;
// oneDNN's gate g (i, f, c~, o) is ONNX's gate onnx_gate[g] (ONNX order: i, o, f, c).
constexpr std::size_t onnx_gate[gates] = {0, 2, 3, 1};

dnnl::memory::desc with_any(const dnnl::memory::desc& md) {
    return dnnl::memory::desc(md.dims(), md.data_type(), dnnl::memory::format_tag::any);
}

// Operands 0 to 3 of an RNN primitive (x, weights layer, weights iter, bias), as LSTM and GRU
// order them. Weights are stored plain (ldigo); the primitive packs them its way, once, here.
void bind_layer_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                         const std::vector<argument>& constants, const dnnl::engine& eng, const std::string& name) {
    k.bind(DNNL_ARG_SRC_LAYER, 0, pd.src_desc(0));
    bind_constant_weights(k, md_record::from(md_of(operands[1])), pd.weights_desc(0), 1, constants, eng, name,
                          DNNL_ARG_WEIGHTS_LAYER);
    bind_constant_weights(k, md_record::from(md_of(operands[2])), pd.weights_desc(1), 2, constants, eng, name,
                          DNNL_ARG_WEIGHTS_ITER);
    k.bind(DNNL_ARG_BIAS, 3, md_of(operands[3]));
}

bool lens_are(instruction_ref i, const std::vector<std::size_t>& want) { return i->get_shape().lens() == want; }

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
    bind_layer_operands(k, pd, operands, constants, eng, name());
    std::size_t next = 4;
    if (has_initial_h) {
        k.bind(DNNL_ARG_SRC_ITER, next, md_with_rank(operands[next], 4));
        ++next;
    }
    if (has_initial_c) k.bind(DNNL_ARG_SRC_ITER_C, next, md_with_rank(operands[next], 4));
}

namespace {

// GRU's and the vanilla cell's result: oneDNN's dst_layer [T, N, D * H] from x [T, N, I].
shape layer_result(const std::string& name, const std::vector<shape>& operands, bool has_initial_h,
                   std::size_t hidden_size, std::int64_t direction) {
    const std::size_t want = 4 + (has_initial_h ? 1 : 0);
    if (operands.size() != want)
        throw_error(error_code::shape, name + ": expected " + std::to_string(want) + " operands, got " +
                                           std::to_string(operands.size()));
    const auto& x = operands[0];
    if (x.ndim() != 3 || x.get_type() != type::float32 || hidden_size == 0 || direction < 0 || direction > 2)
        throw_error(error_code::shape, name + ": x must be float32 [T, N, I], got " + x.to_string());
    const auto& l = x.lens();
    return shape(type::float32, {l[0], l[1], (direction == 2 ? 2 : 1) * hidden_size});
}

// The memory descriptors GRU and the vanilla cell are made from, in oneDNN's argument order;
// the weights as "any": the primitive picks its packed layout (bound in bind_operands).
struct layer_descs {
    dnnl::rnn_direction dir;
    dnnl::memory::desc x, h0, wl, wi, bias, out;
    layer_descs(const std::vector<shape>& operands, const shape& dst, bool has_initial_h, std::int64_t direction)
        : dir(direction == 2   ? dnnl::rnn_direction::bidirectional_concat
              : direction == 1 ? dnnl::rnn_direction::unidirectional_right2left
                               : dnnl::rnn_direction::unidirectional_left2right),
          x(md_of(operands.at(0))),
          h0(has_initial_h ? md_with_rank(operands.at(4), 4) : dnnl::memory::desc()),
          wl(with_any(md_of(operands.at(1)))),
          wi(with_any(md_of(operands.at(2)))),
          bias(md_of(operands.at(3))),
          out(md_of(dst)) {}
};

}  // namespace

shape gru::logical_shape(const std::vector<shape>& operands) const {
    return layer_result(name(), operands, has_initial_h, hidden_size, direction);
}

dnnl::primitive_desc_base gru::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                       const shape& dst) const {
    expect_plain();
    const layer_descs m(operands, dst, has_initial_h, direction);
    const auto attr = make_attr({}, operands, 3);
    const auto prop = dnnl::prop_kind::forward_inference;
    if (linear_before_reset) {
        dnnl::lbr_gru_forward::desc d(prop, m.dir, m.x, m.h0, m.wl, m.wi, m.bias, m.out, dnnl::memory::desc());
        return dnnl::lbr_gru_forward::primitive_desc(d, attr, eng);
    }
    dnnl::gru_forward::desc d(prop, m.dir, m.x, m.h0, m.wl, m.wi, m.bias, m.out, dnnl::memory::desc());
    return dnnl::gru_forward::primitive_desc(d, attr, eng);
}

void gru::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                        const std::vector<argument>& constants, const dnnl::engine& eng) const {
    bind_layer_operands(k, pd, operands, constants, eng, name());
    if (has_initial_h) k.bind(DNNL_ARG_SRC_ITER, 4, md_with_rank(operands[4], 4));
}

shape vanilla_rnn::logical_shape(const std::vector<shape>& operands) const {
    if (activation != "Relu" && activation != "Tanh" && activation != "Sigmoid")
        throw_error(error_code::shape, name() + ": activation must be Relu, Tanh or Sigmoid, got " + activation);
    return layer_result(name(), operands, has_initial_h, hidden_size, direction);
}

dnnl::primitive_desc_base vanilla_rnn::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                               const shape& dst) const {
    expect_plain();
    const layer_descs m(operands, dst, has_initial_h, direction);
    const auto f = activation == "Relu"   ? dnnl::algorithm::eltwise_relu
                   : activation == "Tanh" ? dnnl::algorithm::eltwise_tanh
                                          : dnnl::algorithm::eltwise_logistic;
    dnnl::vanilla_rnn_forward::desc d(dnnl::prop_kind::forward_inference, f, m.dir, m.x, m.h0, m.wl, m.wi, m.bias,
                                      m.out, dnnl::memory::desc());
    return dnnl::vanilla_rnn_forward::primitive_desc(d, make_attr({}, operands, 3), eng);
}

void vanilla_rnn::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                                const std::vector<shape>& operands, const std::vector<argument>& constants,
                                const dnnl::engine& eng) const {
    bind_layer_operands(k, pd, operands, constants, eng, name());
    if (has_initial_h) k.bind(DNNL_ARG_SRC_ITER, 4, md_with_rank(operands[4], 4));
}

namespace {

bool is_tuple_elem(instruction_ref u) { return u->get_operator().any_cast<builtin::get_tuple_elem>() != nullptr; }

// The users of an IR lstm's outputs Y, Y_h, Y_c (get_tuple_elem 0, 1, 2) that are used,
// or nothing when something else reads the tuple.
std::optional<std::vector<std::vector<instruction_ref>>> lstm_users(instruction_ref ins) {
    std::vector<std::vector<instruction_ref>> users(3);
    for (auto u : ins->outputs()) {
        if (!is_tuple_elem(u)) return std::nullopt;
        const auto index = u->get_operator().to_value().at("index").get_int64();
        if (index < 0 || index > 2) return std::nullopt;
        if (index == 0 || !u->outputs().empty()) users[static_cast<std::size_t>(index)].push_back(u);
    }
    return users;
}

bool default_activations(const op::lstm& a) {
    for (std::size_t i = 0; i < a.activations.size(); ++i)
        if (a.activations[i] != (i % 3 == 0 ? "Sigmoid" : "Tanh")) return false;
    return a.activations.empty() || a.activations.size() == 3 * a.num_directions();
}

bool lower_lstm_packed(lower_env& env, instruction_ref ins, std::vector<instruction_ref>& dead) {
    const auto* a = ins->get_operator().any_cast<op::lstm>();
    if (!a || (a->layout != 0 && a->layout != 1) || a->clip != 0 || a->input_forget || a->has_sequence_lens ||
        !default_activations(*a))
        return false;
    // layout 1 (batch first): X [N, T, I], initial states and Y_h, Y_c [N, D, H], Y [N, T, D, H]; the
    // kernel runs time-major on transposed copies, and its results are transposed back.
    const bool batch_first = a->layout == 1;
    const auto& in = ins->inputs();
    auto x = in.at(0), w = in.at(1), r = in.at(2);
    std::size_t next = 3;
    std::optional<instruction_ref> b, h0, c0, p;
    if (a->has_bias) b = in.at(next++);
    if (a->has_initial_h) h0 = in.at(next++);
    if (a->has_initial_c) c0 = in.at(next++);
    if (a->has_peephole) p = in.at(next++);
    auto literal_f32 = [](std::optional<instruction_ref> i) { return !i || ((*i)->is_literal() && f32_static(*i)); };
    // A generic program's x (T and N known when it runs, I fixed) runs on cpu::dyn_lstm.
    const auto& xs = x->get_shape();
    const bool dynamic = xs.is_tensor() && xs.dynamic();
    auto f32_rank3 = [](instruction_ref i) {
        const auto& s = i->get_shape();
        return s.is_tensor() && s.get_type() == type::float32 && s.ndim() == 3;
    };
    auto state_ok = [&](std::optional<instruction_ref> i) {
        return !i || (dynamic ? f32_rank3(*i) : f32_static(*i));
    };
    if (!f32_rank3(x) || (dynamic ? !xs.dyn_dims()[2].is_fixed() : !f32_static(x)) || !literal_f32(w) ||
        !literal_f32(r) || !literal_f32(b) || !literal_f32(p) || !state_ok(h0) || !state_ok(c0))
        return false;
    if (dynamic) {
        // Read as stored: a value in one of oneDNN's layouts is reordered to plain first.
        x = plain(env, x);
        if (h0) h0 = plain(env, *h0);
        if (c0) c0 = plain(env, *c0);
    }
    auto users = lstm_users(ins);
    if (!users) return false;
    const bool states = !(*users)[1].empty() || !(*users)[2].empty();
    if ((*users)[0].empty() && !states) return false;
    const instruction_ref at = std::next(ins);  // the kernel's place
    lstm_dims d;
    if (dynamic) {
        d.I = xs.dyn_dims()[2].min;  // T and N: each call's
    } else {
        const auto& xl = xs.lens();
        d.T = xl[batch_first ? 1 : 0];
        d.N = xl[batch_first ? 0 : 1];
        d.I = xl[2];
    }
    d.H = a->hidden_size;
    d.D = a->num_directions();
    d.reverse = a->direction == 1;
    const std::size_t H = d.H, D = d.D;
    if (H == 0 || !lens_are(w, {D, 4 * H, d.I}) || !lens_are(r, {D, 4 * H, H}) || (b && !lens_are(*b, {D, 8 * H})) ||
        (p && !lens_are(*p, {D, 3 * H})))
        return false;
    if (dynamic) {
        // The states' fixed dims: D and H ([N, D, H] batch first). A state may be static where
        // x is not (a constant initial state, or a batch a bucket fixed): its dims as ranges.
        auto fixed = [](const dynamic_dimension& v, std::size_t want) { return v.is_fixed() && v.min == want; };
        for (auto s : {h0, c0}) {
            if (!s) continue;
            const auto dims = (*s)->get_shape().to_dynamic_dims();
            if (!fixed(dims[batch_first ? 1 : 0], D) || !fixed(dims[2], H)) return false;
        }
    } else {
        const std::vector<std::size_t> state_lens = batch_first ? std::vector<std::size_t>{d.N, D, H}
                                                                : std::vector<std::size_t>{D, d.N, H};
        if ((h0 && !lens_are(*h0, state_lens)) || (c0 && !lens_are(*c0, state_lens))) return false;
        const std::vector<std::size_t> y_lens = batch_first ? std::vector<std::size_t>{d.N, d.T, D, H}
                                                            : std::vector<std::size_t>{d.T, D, d.N, H};
        for (std::size_t i = 0; i < 3; ++i)
            for (auto u : (*users)[i])
                if (!lens_are(u, i == 0 ? y_lens : state_lens)) return false;
    }
    auto wv = w->get_literal().to_vector<float>();
    auto rv = r->get_literal().to_vector<float>();
    std::vector<float> bv, pv;
    if (b) bv = (*b)->get_literal().to_vector<float>();
    if (p) pv = (*p)->get_literal().to_vector<float>();
    auto packed = lstm_pack(d, wv.data(), rv.data(), b ? bv.data() : nullptr, p ? pv.data() : nullptr);
    auto& m = env.m;
    if (batch_first) {
        auto swap01 = [&](instruction_ref i) {
            const std::vector<std::int64_t> order{1, 0, 2};
            return m.insert_instruction(at, op::transpose{order}, {i});
        };
        x = swap01(x);
        if (h0) h0 = swap01(*h0);
        if (c0) c0 = swap01(*c0);
    }
    auto lit = [&](std::vector<float> v) {
        const std::size_t n = v.size();
        return m.insert_literal(at, literal(shape(type::float32, {n}), std::move(v)));
    };
    // The kernel reads row-major activations (cpu::dyn_lstm copies views each call).
    auto row_major = [&](instruction_ref i) {
        return dynamic ? i : ensure_layout(env, at, i, i->get_shape().as_standard());
    };
    std::vector<instruction_ref> args{row_major(x), lit(std::move(packed.w)), lit(std::move(packed.r)),
                                      lit(std::move(packed.bias))};
    if (p) args.push_back(lit(std::move(packed.peep)));
    if (h0) args.push_back(row_major(*h0));
    if (c0) args.push_back(row_major(*c0));
    lstm_packed op;
    op.hidden_size = H;
    op.directions = D;
    op.reverse = d.reverse;
    op.has_peephole = p.has_value();
    op.has_initial_h = h0.has_value();
    op.has_initial_c = c0.has_value();
    op.final_states = states;
    instruction_ref all;
    if (dynamic) {
        dyn_lstm dyn;
        dyn.cell = op;
        all = m.insert_instruction(at, dyn, args);
    } else {
        args.push_back(m.insert_instruction(at, builtin::allocate{shape(type::float32, {d.workspace()})}, {}));
        const std::size_t rows = d.T + (states ? 2 : 0);
        args.push_back(m.insert_instruction(at, builtin::allocate{shape(type::float32, {rows, D, d.N, H})}, {}));
        all = m.insert_instruction(at, op, args);
    }
    // Each output's users read their rows of the one result (all of it for Y without
    // the states: a view). Rows from the end (Y_h, Y_c: -2 and -1) hold for any T.
    const auto end = std::numeric_limits<std::int64_t>::max();
    auto rows_of = [](std::int64_t begin, std::int64_t end) {
        op::slice s;
        s.axes = {0};
        s.starts = {begin};
        s.ends = {end};
        return s;
    };
    auto perm = [](std::vector<std::int64_t> v) { return op::transpose{std::move(v)}; };
    // Batch first: the rows transposed back, as a row-major copy (a generic program's
    // next ops read the view as it comes).
    auto back = [&](instruction_ref u, instruction_ref rows, std::vector<std::int64_t> order) {
        auto t = m.insert_instruction(u, perm(std::move(order)), {rows});
        if (dynamic) m.replace_instruction(u, t);
        else m.replace_instruction(u, ensure_layout(env, u, t, t->get_shape().as_standard()));
    };
    const auto y_rows = rows_of(0, states ? -2 : end);
    for (auto u : (*users)[0]) {
        if (!batch_first) m.replace_instruction(u, y_rows, {all});
        else back(u, m.insert_instruction(u, y_rows, {all}), {2, 0, 1, 3});
    }
    const std::vector<std::int64_t> dims{static_cast<std::int64_t>(D), dynamic ? -1 : static_cast<std::int64_t>(d.N),
                                         static_cast<std::int64_t>(H)};
    const auto state_shape = op::reshape{dims};
    for (std::int64_t i = 1; i < 3; ++i)
        for (auto u : (*users)[static_cast<std::size_t>(i)]) {
            auto s = m.insert_instruction(u, rows_of(i - 3, i == 2 ? end : i - 2), {all});
            if (!batch_first) m.replace_instruction(u, state_shape, {s});
            else back(u, m.insert_instruction(u, state_shape, {s}), {1, 0, 2});
        }
    for (auto u : std::vector<instruction_ref>(ins->outputs()))
        if (is_tuple_elem(u)) dead.push_back(u);
    dead.push_back(ins);
    return true;
}

bool lower_lstm_dnnl(lower_env& env, instruction_ref ins, std::vector<instruction_ref>& dead) {
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
    if (!f32_static(x) || !w->is_literal() || !r->is_literal() || !f32_static(w) || !f32_static(r) ||
        (b && (!(*b)->is_literal() || !f32_static(*b))))
        return false;
    if ((h0 && !f32_static(*h0)) || (c0 && !f32_static(*c0)) || x->get_shape().ndim() != 3) return false;
    // Only Y may be used: oneDNN does not write the final states here.
    std::optional<instruction_ref> y;
    for (auto u : ins->outputs()) {
        if (!is_tuple_elem(u)) return false;
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

// Default GRU activations (f = Sigmoid, g = Tanh), the only ones oneDNN's cell has: none
// given, one pair for every direction, or one pair for both.
bool default_activations(const op::gru& a) {
    for (std::size_t i = 0; i < a.activations.size(); ++i)
        if (a.activations[i] != (i % 2 == 0 ? "Sigmoid" : "Tanh")) return false;
    return a.activations.empty() || a.activations.size() == 2 || a.activations.size() == 2 * a.num_directions();
}

// One activation for every direction (oneDNN's vanilla cell has one), one it has, no
// alpha or beta; nullopt otherwise. None given: ONNX's default, Tanh.
std::optional<std::string> single_activation(const op::rnn& a) {
    if (!a.activation_alpha.empty() || !a.activation_beta.empty()) return std::nullopt;
    if (a.activations.empty()) return "Tanh";
    for (const auto& f : a.activations)
        if (f != a.activations.front()) return std::nullopt;
    const auto& f = a.activations.front();
    if (f != "Relu" && f != "Tanh" && f != "Sigmoid") return std::nullopt;
    return f;
}

// An ONNX GRU or RNN on oneDNN's GRU or vanilla RNN primitive (cpu::gru, cpu::rnn). Its one
// result is oneDNN's dst_layer [T, N, D * H]; ONNX's Y [T, D, N, H] is that viewed as
// [T, N, D, H] and transposed (a copy when D is 2), and Y_h [D, N, H] is each direction's
// last step in it (step T - 1 forward, step 0 reverse: without sequence lengths every
// sequence is full), so oneDNN's dst_iter is not needed.
bool lower_recurrent_dnnl(lower_env& env, instruction_ref ins, std::vector<instruction_ref>& dead) {
    const auto* gru_attrs = ins->get_operator().any_cast<op::gru>();
    const auto* rnn_attrs = ins->get_operator().any_cast<op::rnn>();
    const op::recurrent_attributes* a = gru_attrs;
    if (!a) a = rnn_attrs;
    if (!a || a->layout != 0 || a->clip != 0 || a->has_sequence_lens) return false;
    std::optional<std::string> activation;
    if (gru_attrs && !default_activations(*gru_attrs)) return false;
    if (rnn_attrs && !(activation = single_activation(*rnn_attrs))) return false;
    const auto& in = ins->inputs();
    auto x = plain(env, in.at(0)), w = in.at(1), r = in.at(2);
    std::size_t next = 3;
    std::optional<instruction_ref> b, h0;
    if (a->has_bias) b = in.at(next++);
    if (a->has_initial_h) h0 = plain(env, in.at(next++));
    auto literal_f32 = [](std::optional<instruction_ref> i) { return !i || ((*i)->is_literal() && f32_static(*i)); };
    // A generic program's x [T, N, I] (I fixed) runs on cpu::dyn_recurrent, the cell made per shape.
    const auto& xs = x->get_shape();
    const bool dynamic = xs.is_tensor() && xs.dynamic();
    auto f32_rank3 = [](const shape& s) { return s.is_tensor() && s.get_type() == type::float32 && s.ndim() == 3; };
    if (!f32_rank3(xs) || (dynamic ? !xs.dyn_dims()[2].is_fixed() : !f32_static(x)) || !literal_f32(w) ||
        !literal_f32(r) || !literal_f32(b) || (h0 && !f32_rank3((*h0)->get_shape())) || (h0 && !dynamic && !f32_static(*h0)))
        return false;
    // The used outputs (Y, Y_h: get_tuple_elem 0, 1); anything else reading the tuple keeps it on ref.
    std::vector<instruction_ref> y_users, yh_users;
    for (auto u : ins->outputs()) {
        if (!is_tuple_elem(u)) return false;
        const auto index = u->get_operator().to_value().at("index").get_int64();
        if (index != 0 && index != 1) return false;
        if (!u->outputs().empty()) (index == 0 ? y_users : yh_users).push_back(u);
    }
    if (y_users.empty() && yh_users.empty()) return false;
    const std::size_t I = dynamic ? xs.dyn_dims()[2].min : xs.lens()[2], H = a->hidden_size, D = a->num_directions();
    // Gates: GRU's z, r, h (oneDNN: u, r, o, the same order); the vanilla cell's one.
    const bool lbr = gru_attrs && a->linear_before_reset;
    const std::size_t G = gru_attrs ? 3 : 1;
    const std::size_t BG = lbr ? 4 : G;  // bias gates: lbr keeps Rb_h apart (oneDNN's u')
    if (H == 0 || !lens_are(w, {D, G * H, I}) || !lens_are(r, {D, G * H, H}) || (b && !lens_are(*b, {D, 2 * G * H})) ||
        (h0 && !dynamic && !lens_are(*h0, {D, xs.lens()[1], H})))
        return false;
    // ONNX's W [D, G*H, I] and R [D, G*H, H] (row g * H + h per gate) into oneDNN's ldigo
    // [1, D, I or H, G, H]; the bias [D, 2*G*H] (Wb, then Rb) into ldgo [1, D, BG, H].
    auto wv = w->get_literal().to_vector<float>();
    auto rv = r->get_literal().to_vector<float>();
    std::vector<float> wl(D * I * G * H), wi(D * H * G * H), bias(D * BG * H, 0.0f), bv;
    if (b) bv = (*b)->get_literal().to_vector<float>();
    for (std::size_t d = 0; d < D; ++d)
        for (std::size_t g = 0; g < G; ++g)
            for (std::size_t h = 0; h < H; ++h) {
                const std::size_t row = (d * G + g) * H + h;
                for (std::size_t c = 0; c < I; ++c) wl[((d * I + c) * G + g) * H + h] = wv[row * I + c];
                for (std::size_t c = 0; c < H; ++c) wi[((d * H + c) * G + g) * H + h] = rv[row * H + c];
                if (!b) continue;
                const float wb = bv[d * 2 * G * H + g * H + h], rb = bv[d * 2 * G * H + (G + g) * H + h];
                // Linear before reset: h~ = g(x Wh + Wb_h + r (.) (H Rh + Rb_h)), so Rb_h
                // stays apart (inside the reset); every other bias pair adds.
                if (lbr && g == 2) {
                    bias[(d * BG + 2) * H + h] = wb;
                    bias[(d * BG + 3) * H + h] = rb;
                } else {
                    bias[(d * BG + g) * H + h] = wb + rb;
                }
            }
    auto& m = env.m;
    const auto at = std::next(ins);  // everything goes between the recurrent op and its users
    auto f32 = [](std::vector<std::size_t> lens) { return shape(type::float32, std::move(lens)); };
    std::vector<instruction_ref> operands{x, m.insert_literal(at, literal(f32({1, D, I, G, H}), wl)),
                                          m.insert_literal(at, literal(f32({1, D, H, G, H}), wi)),
                                          m.insert_literal(at, literal(f32({1, D, BG, H}), bias))};
    if (h0) operands.push_back(*h0);
    std::optional<operation> cell;
    if (gru_attrs) {
        gru op;
        op.hidden_size = H;
        op.direction = a->direction;
        op.linear_before_reset = a->linear_before_reset;
        op.has_initial_h = h0.has_value();
        cell = op;
    } else {
        vanilla_rnn op;
        op.hidden_size = H;
        op.direction = a->direction;
        op.activation = *activation;
        op.has_initial_h = h0.has_value();
        cell = op;
    }
    instruction_ref result;
    if (dynamic) {
        dyn_recurrent op;
        op.cell = *cell;
        result = m.insert_instruction(at, op, operands);
    } else {
        const shape dst = f32({xs.lens()[0], xs.lens()[1], D * H});
        result = m.insert_instruction(at, builtin::allocate{dst}, {});  // emit replaces it by the kernel
        const bool emitted = gru_attrs ? emit(env, result, *cell->any_cast<gru>(), operands, dst)
                                       : emit(env, result, *cell->any_cast<vanilla_rnn>(), operands, dst);
        if (!emitted) {
            m.remove_instruction(result);
            for (std::size_t i = 3; i-- > 1;) m.remove_instruction(operands[i]);
            return false;
        }
    }
    auto add = [&](const operation& o, std::vector<instruction_ref> args) { return m.insert_instruction(at, o, args); };
    // Dims as reshape's 0 (kept) and -1 (inferred), which hold for any T and N; a generic
    // program's transposed views stay views (its next ops read them as they come).
    auto row_major = [&](instruction_ref i) {
        return dynamic ? i : ensure_layout(env, at, i, i->get_shape().as_standard());
    };
    auto dims = [](std::vector<std::int64_t> v) { return op::reshape{std::move(v)}; };
    const auto h = static_cast<std::int64_t>(H), dirs = static_cast<std::int64_t>(D);
    const auto split = add(dims({0, 0, dirs, h}), {result});  // the same memory
    if (!y_users.empty()) {
        // One direction: [T, N, 1, H] is already ONNX's [T, 1, N, H] in memory.
        auto y = D == 1 ? add(dims({0, 1, -1, h}), {result})
                        : row_major(add(op::transpose{{0, 2, 1, 3}}, {split}));
        for (auto u : y_users) m.replace_instruction(u, y);
    }
    if (!yh_users.empty()) {
        std::vector<instruction_ref> last;  // [1, N, 1, H] per direction
        for (std::size_t d = 0; d < D; ++d) {
            const bool reverse = a->direction == 1 || d == 1;
            const std::int64_t t = reverse ? 0 : -1;  // the first step, or the last
            op::slice s;
            s.axes = {0, 2};
            s.starts = {t, static_cast<std::int64_t>(d)};
            s.ends = {reverse ? 1 : std::numeric_limits<std::int64_t>::max(), static_cast<std::int64_t>(d + 1)};
            last.push_back(add(s, {split}));
        }
        // One direction: [1, N, 1, H] is already ONNX's [1, N, H] in memory.
        instruction_ref yh = D == 1 ? add(dims({1, -1, h}), {last[0]})
                                    : row_major(add(op::transpose{{1, 0, 2}},
                                                    {add(dims({-1, dirs, h}), {add(op::concat{2}, last)})}));
        for (auto u : yh_users) m.replace_instruction(u, yh);
    }
    for (auto u : std::vector<instruction_ref>(ins->outputs())) dead.push_back(u);
    dead.push_back(ins);
    return true;
}

}  // namespace

bool lower_lstm_kiln(lower_env& env, instruction_ref ins) {
    return env.ctx.options().lstm != lstm_choice::dnnl && lower_lstm_packed(env, ins, env.dead);
}

bool lower_lstm_onednn(lower_env& env, instruction_ref ins) { return lower_lstm_dnnl(env, ins, env.dead); }

bool lower_gru_onednn(lower_env& env, instruction_ref ins) { return lower_recurrent_dnnl(env, ins, env.dead); }

bool lower_rnn_onednn(lower_env& env, instruction_ref ins) { return lower_recurrent_dnnl(env, ins, env.dead); }

shape lstm_packed::compute_shape(const std::vector<shape>& inputs) const {
    const std::size_t want = 6 + (has_peephole ? 1 : 0) + (has_initial_h ? 1 : 0) + (has_initial_c ? 1 : 0);
    if (inputs.size() != want)
        throw_error(error_code::shape, name() + ": expected " + std::to_string(want) + " inputs, got " +
                                           std::to_string(inputs.size()));
    // Row-major, but dims of length 1 may carry any stride.
    auto row_major = [](const shape& s) {
        std::size_t expect = 1;
        for (std::size_t i = s.ndim(); i-- > 0;) {
            if (s.lens()[i] != 1 && s.strides()[i] != expect) return false;
            expect *= s.lens()[i];
        }
        return true;
    };
    for (const auto& s : inputs)
        if (!s.is_tensor() || s.dynamic() || s.get_type() != type::float32 || !row_major(s))
            throw_error(error_code::shape, name() + ": inputs must be static row-major float32 tensors, got " +
                                               s.to_string());
    const auto& x = inputs[0];
    if (x.ndim() != 3 || hidden_size == 0 || (directions != 1 && directions != 2))
        throw_error(error_code::shape, name() + ": x must be [T, N, I] (got " + x.to_string() + "), hidden_size > 0, 1 or 2 directions");
    lstm_dims d{x.lens()[0], x.lens()[1], x.lens()[2], hidden_size, directions, reverse};
    const std::size_t H = hidden_size, D = directions, nb = d.blocks();
    std::vector<std::size_t> sizes{d.I * D * d.columns(), D * nb * H * 32, D * d.columns()};
    if (has_peephole) sizes.push_back(D * nb * 24);
    if (has_initial_h) sizes.push_back(D * d.N * H);
    if (has_initial_c) sizes.push_back(D * d.N * H);
    for (std::size_t i = 0; i < sizes.size(); ++i)
        if (inputs[i + 1].elements() != sizes[i])
            throw_error(error_code::shape, name() + ": input " + std::to_string(i + 1) + " " +
                                               inputs[i + 1].to_string() + " should have " +
                                               std::to_string(sizes[i]) + " elements");
    if (inputs[inputs.size() - 2].elements() < d.workspace())
        throw_error(error_code::shape, name() + ": workspace " + inputs[inputs.size() - 2].to_string() +
                                           " smaller than " + std::to_string(d.workspace()) + " floats");
    const shape& out = inputs.back();
    const std::size_t rows = d.T + (final_states ? 2 : 0);
    if (out.lens() != std::vector<std::size_t>{rows, D, d.N, H})
        throw_error(error_code::shape, name() + ": output buffer " + out.to_string() + " is not [" +
                                           (final_states ? "T + 2" : "T") + ", D, N, H]");
    return out;
}

argument lstm_packed::compute(context& ctx, const shape&, const std::vector<argument>& args) const {
    const auto& c = as_cpu_context(ctx, name());
    const auto& xl = args[0].get_shape().lens();
    lstm_dims d{xl[0], xl[1], xl[2], hidden_size, directions, reverse};
    auto f = [&](std::size_t i) { return reinterpret_cast<const float*>(args[i].data()); };
    std::size_t next = 4;
    const float* peep = has_peephole ? f(next++) : nullptr;
    const float* h0 = has_initial_h ? f(next++) : nullptr;
    const float* c0 = has_initial_c ? f(next++) : nullptr;
    auto* ws = reinterpret_cast<float*>(args[args.size() - 2].data());
    auto* y = reinterpret_cast<float*>(args.back().data());
    const auto isa = c.options().lstm == lstm_choice::portable ? lstm_isa::portable : lstm_isa::best;
    lstm_run(d, f(0), f(1), f(2), f(3), peep, h0, c0, ws, y, c.threads(), isa,
             final_states ? y + d.T * d.D * d.N * d.H : nullptr);
    return args.back();
}

KILN_REGISTER_OP(lstm)
KILN_REGISTER_OP(lstm_packed)
KILN_REGISTER_OP(gru)
KILN_REGISTER_OP(vanilla_rnn)

}  // namespace kiln::cpu
