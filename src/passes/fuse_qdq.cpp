// fuse_qdq (fuse_qdq.hpp). Runs before propagate_constants: that pass would fold a
// DequantizeLinear of small weights into a float32 literal, and the int8 weights would
// be gone.
#include "passes/fuse_qdq.hpp"

#include "passes/fuse_int4.hpp"

#include "passes/dead_code_elimination.hpp"
#include "passes/rewrite_utils.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/quant_fused.hpp"
#include "ops/quantize.hpp"

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {

using rewrite::constant_of;
using rewrite::is;

bool is_8bit(type t) { return t == type::int8 || t == type::uint8; }

// A DequantizeLinear's quantized input and its literal parameters.
struct dequantized {
    instruction_ref q;
    std::vector<double> scales;  // one, or one per element along `axis`
    std::int64_t zero_point = 0; // every zero point has this value
    std::size_t axis = 0;
};

std::optional<dequantized> dequantize_of(instruction_ref ins) {
    if (!is<op::dequantize_linear_op>(ins)) return std::nullopt;
    const auto& op = ins->get_operator().get<op::dequantize_linear_op>();
    if (op.block_size != 0 || ins->get_shape().get_type() != type::float32) return std::nullopt;
    auto s = constant_of(ins->inputs()[1]);
    if (!s || s->get_shape().get_type() != type::float32) return std::nullopt;
    dequantized d;
    d.q = ins->inputs()[0];
    d.scales = rewrite::values_of(*s);
    if (ins->inputs().size() > 2) {
        auto z = constant_of(ins->inputs()[2]);
        if (!z) return std::nullopt;
        auto zv = rewrite::values_of(*z);
        if (zv.empty() || std::any_of(zv.begin(), zv.end(), [&](double v) { return v != zv[0]; })) return std::nullopt;
        d.zero_point = static_cast<std::int64_t>(zv[0]);
    }
    const auto rank = static_cast<std::int64_t>(d.q->get_shape().ndim());
    d.axis = static_cast<std::size_t>(op.axis < 0 ? op.axis + rank : op.axis);
    return d;
}

// An 8-bit activation with one scale.
std::optional<dequantized> activation_of(instruction_ref ins) {
    auto d = dequantize_of(ins);
    if (!d || d->scales.size() != 1 || !is_8bit(d->q->get_shape().get_type())) return std::nullopt;
    return d;
}

// 8-bit weights with one scale, or one per element along `channel_axis`.
std::optional<dequantized> weights_of(instruction_ref ins, std::size_t channel_axis) {
    auto d = dequantize_of(ins);
    if (!d || !is_8bit(d->q->get_shape().get_type())) return std::nullopt;
    if (d->scales.size() == 1) return d;
    const auto& s = d->q->get_shape();
    if (s.dynamic() || d->axis != channel_axis || s.lens()[channel_axis] != d->scales.size()) return std::nullopt;
    return d;
}

// The bias operand: an int32 literal when it is exact in accumulator units, else float32.
std::optional<instruction_ref> bias_of(module& m, instruction_ref pos, instruction_ref b, const op::requantize_params& p,
                                       std::size_t channels) {
    if (b->get_shape().elements() != channels) return std::nullopt;
    const shape flat(type::float32, {channels});
    if (auto d = dequantize_of(b)) {
        auto q = constant_of(d->q);
        if (!q || q->get_shape().get_type() != type::int32) return std::nullopt;
        auto qv = rewrite::values_of(*q);
        bool exact = d->zero_point == 0;
        for (std::size_t c = 0; exact && c < channels; ++c)
            exact = static_cast<float>(d->scales[d->scales.size() == 1 ? 0 : c]) == p.channel_scale(c);
        if (exact) return m.insert_literal(pos, rewrite::make_literal(shape(type::int32, {channels}), qv));
        std::vector<double> f(channels);
        for (std::size_t c = 0; c < channels; ++c)
            f[c] = op::dequantize_linear_op::apply<float>(static_cast<float>(qv[c]), static_cast<float>(d->zero_point),
                                                          static_cast<float>(d->scales[d->scales.size() == 1 ? 0 : c]));
        return m.insert_literal(pos, rewrite::make_literal(flat, f));
    }
    auto l = constant_of(b);
    if (!l || l->get_shape().get_type() != type::float32) return std::nullopt;
    return m.insert_literal(pos, rewrite::make_literal(flat, rewrite::values_of(*l)));
}

// The only reader of `ins`, when there is exactly one and `ins` is no result.
std::optional<instruction_ref> sole_user(module& m, instruction_ref ins) {
    if (ins->outputs().size() != 1) return std::nullopt;
    auto u = ins->outputs().front();
    if (!rewrite::only_used_by(m, ins, u)) return std::nullopt;
    return u;
}

// Folds [Relu | Clip] -> QuantizeLinear after `product` into p's quantized result;
// returns the QuantizeLinear (the instruction the fused op replaces).
std::optional<instruction_ref> fold_quantize(module& m, instruction_ref product, op::requantize_params& p) {
    auto u = sole_user(m, product);
    if (!u) return std::nullopt;
    std::optional<double> lo, hi;  // float bounds of a folded Relu / Clip
    if (is<op::relu_op>(*u) || is<op::clip_op>(*u)) {
        if (is<op::relu_op>(*u)) lo = 0.0;
        else {
            auto a = constant_of((*u)->inputs()[1]), b = constant_of((*u)->inputs()[2]);
            if (!a || !b || a->get_shape().elements() != 1 || b->get_shape().elements() != 1) return std::nullopt;
            lo = rewrite::values_of(*a)[0];
            hi = rewrite::values_of(*b)[0];
        }
        u = sole_user(m, *u);
        if (!u) return std::nullopt;
    }
    auto q = *u;
    if (!is<op::quantize_linear_op>(q) || q->inputs().size() != 3) return std::nullopt;
    const auto& qop = q->get_operator().get<op::quantize_linear_op>();
    auto s = constant_of(q->inputs()[1]), z = constant_of(q->inputs()[2]);
    const type t = q->get_shape().get_type();
    if (qop.block_size != 0 || qop.precision || !s || !z || s->get_shape().elements() != 1 ||
        s->get_shape().get_type() != type::float32 || z->get_shape().elements() != 1 || !is_8bit(t))
        return std::nullopt;
    p.out_type = t;
    p.y_scale = static_cast<float>(rewrite::values_of(*s)[0]);
    p.y_zero_point = static_cast<std::int64_t>(rewrite::values_of(*z)[0]);
    p.y_min = t == type::int8 ? -128 : 0;
    p.y_max = t == type::int8 ? 127 : 255;
    // Rounding and x / scale are monotone, so Q(clip(v, a, b)) = clamp(Q(v), Q(a), Q(b)).
    auto level = [&](double v) {
        return static_cast<std::int64_t>(std::nearbyint(static_cast<float>(v) / p.y_scale)) + p.y_zero_point;
    };
    if (lo) p.y_min = std::clamp(level(*lo), p.y_min, p.y_max);
    if (hi) p.y_max = std::clamp(level(*hi), p.y_min, p.y_max);
    return q;
}

void set_inputs(op::requantize_params& p, const dequantized& x, const dequantized& w) {
    p.x_scale = static_cast<float>(x.scales[0]);
    p.x_zero_point = x.zero_point;
    p.w_scales.assign(w.scales.begin(), w.scales.end());
    p.w_zero_point = w.zero_point;
}

// Replaces `last` (the product, or the QuantizeLinear folded after it) by `op`.
template <class Op>
void replace(module& m, instruction_ref product, Op op, std::vector<instruction_ref> args) {
    auto q = fold_quantize(m, product, op);
    m.replace_instruction(q ? *q : product, op, std::move(args));
}

// Conv -> Add(conv, DQ(r)) [-> Relu / Clip] -> Q, where the convolution's float result is
// read by nothing but the add (quantize_int8's residual form, int8_options::fuse_residual):
// one quant_convolution with r as its residual operand and the Q folded in. An imported QDQ
// model whose convolution result is Q'd and DQ'd before the add does not match (its conv's
// reader is that Q): it keeps its rounding and becomes quant_convolution -> quant_add.
bool fuse_residual(module& m, instruction_ref conv, op::quant_convolution& op, std::vector<instruction_ref>& args) {
    auto add = sole_user(m, conv);
    if (!add || !is<op::add_op>(*add) || (*add)->inputs().size() != 2) return false;
    const auto& in = (*add)->inputs();
    if (in[0] == in[1]) return false;
    auto r = activation_of(in[0] == conv ? in[1] : in[0]);
    if (!r || r->q->get_shape().dynamic() || conv->get_shape().dynamic() ||
        r->q->get_shape().lens() != conv->get_shape().lens() || (*add)->get_shape().lens() != conv->get_shape().lens())
        return false;
    op::quant_convolution fused = op;
    auto q = fold_quantize(m, *add, fused);
    if (!q) return false;
    fused.has_residual = true;
    fused.r_scale = static_cast<float>(r->scales[0]);
    fused.r_zero_point = r->zero_point;
    args.push_back(r->q);
    m.replace_instruction(*q, fused, args);
    return true;
}

bool fuse_convolution(module& m, instruction_ref ins) {
    const auto& c = ins->get_operator().get<op::convolution>();
    auto x = activation_of(ins->inputs()[0]);
    auto w = weights_of(ins->inputs()[1], 0);
    if (!x || !w || w->q->get_shape().dynamic() || w->q->get_shape().ndim() < 3) return false;
    op::quant_convolution op;
    static_cast<op::conv_attributes&>(op) = c;
    set_inputs(op, *x, *w);
    const std::size_t channels = w->q->get_shape().lens()[0];
    std::vector<instruction_ref> args{x->q, w->q};
    if (ins->inputs().size() > 2) {
        auto b = bias_of(m, ins, ins->inputs()[2], op, channels);
        if (!b) return false;
        op.has_bias = true;
        args.push_back(*b);
    }
    if (fuse_residual(m, ins, op, args)) return true;
    replace(m, ins, op, args);
    return true;
}

// A constant [N] (or [1, N]) added to a matmul's result: a bias.
std::optional<instruction_ref> bias_add_after(module& m, instruction_ref product, std::size_t n) {
    auto u = sole_user(m, product);
    if (!u || !is<op::add_op>(*u) || n == 0) return std::nullopt;
    auto other = (*u)->inputs()[0] == product ? (*u)->inputs()[1] : (*u)->inputs()[0];
    auto l = constant_of(other);
    if (!l || l->get_shape().get_type() != type::float32 || l->get_shape().elements() != n ||
        l->get_shape().lens().back() != n)
        return std::nullopt;
    return u;
}

bool fuse_matmul(module& m, instruction_ref ins) {
    const auto& in = ins->inputs();
    if (in[0]->get_shape().ndim() < 2 || in[1]->get_shape().ndim() < 2) return false;
    auto a = activation_of(in[0]);
    auto b = weights_of(in[1], in[1]->get_shape().ndim() - 1);
    if (!a || !b || (b->scales.size() > 1 && b->q->get_shape().ndim() != 2)) return false;
    op::quant_dot op;
    set_inputs(op, *a, *b);
    // Columns, when known (a bias needs them); 0 for a dynamic run-time operand.
    const auto& bs = b->q->get_shape();
    const std::size_t n = bs.dynamic() ? 0 : bs.lens().back();
    std::vector<instruction_ref> args{a->q, b->q};
    if (auto add = bias_add_after(m, ins, n)) {
        auto other = (*add)->inputs()[0] == ins ? (*add)->inputs()[1] : (*add)->inputs()[0];
        op.has_bias = true;
        args.push_back(*bias_of(m, ins, other, op, n));
        m.replace_instruction(*add, op, args);
        return true;
    }
    replace(m, ins, op, args);
    return true;
}

// Gemm with alpha 1, beta 1 (or no C), A not transposed, constant 2-D weights.
bool fuse_gemm(module& m, instruction_ref ins) {
    const auto& g = ins->get_operator().get<op::gemm>();
    const auto& in = ins->inputs();
    if (g.alpha != 1.0f || g.trans_a || (in.size() > 2 && g.beta != 1.0f)) return false;
    auto a = activation_of(in[0]);
    auto b = weights_of(in[1], g.trans_b ? 0 : 1);
    if (!a || !b) return false;
    auto wl = constant_of(b->q);
    if (!wl) return false;
    op::quant_dot op;
    set_inputs(op, *a, *b);
    instruction_ref w = b->q;
    auto lens = wl->get_shape().lens();
    if (g.trans_b) {  // stored [N, K]: the quantized weights transposed once
        auto v = rewrite::values_of(*wl);
        std::vector<double> t(v.size());
        for (std::size_t i = 0; i < lens[0]; ++i)
            for (std::size_t j = 0; j < lens[1]; ++j) t[j * lens[0] + i] = v[i * lens[1] + j];
        std::swap(lens[0], lens[1]);
        w = m.insert_literal(ins, rewrite::make_literal(shape(wl->get_shape().get_type(), lens), t));
    }
    std::vector<instruction_ref> args{a->q, w};
    if (in.size() > 2) {
        auto bias = bias_of(m, ins, in[2], op, lens[1]);
        if (!bias) return false;
        op.has_bias = true;
        args.push_back(*bias);
    }
    replace(m, ins, op, args);
    return true;
}

// Add(DQ(a), DQ(b)) -> Q, every parameter per tensor: one quant_add (a residual add).
bool fuse_add(module& m, instruction_ref ins) {
    auto a = activation_of(ins->inputs()[0]);
    auto b = activation_of(ins->inputs()[1]);
    if (!a || !b) return false;
    const auto& as = a->q->get_shape();
    const auto& bs = b->q->get_shape();
    if (as.dynamic() || bs.dynamic() || as.lens() != bs.lens()) return false;
    op::quant_dot product_params;  // fold_quantize's output parameters, without a Relu
    auto q = fold_quantize(m, ins, product_params);
    if (!q || product_params.y_min != (product_params.out_type == type::int8 ? -128 : 0) ||
        product_params.y_max != (product_params.out_type == type::int8 ? 127 : 255))
        return false;
    op::quant_add op;
    op.a_scale = static_cast<float>(a->scales[0]);
    op.a_zero_point = a->zero_point;
    op.b_scale = static_cast<float>(b->scales[0]);
    op.b_zero_point = b->zero_point;
    op.y_scale = product_params.y_scale;
    op.y_zero_point = product_params.y_zero_point;
    op.out_type = product_params.out_type;
    m.replace_instruction(*q, op, {a->q, b->q});
    return true;
}

// Q(MaxPool(DQ(x; s, z)); s, z) -> MaxPool(x) over the 8-bit values: DequantizeLinear is
// increasing (s > 0), so a window's max commutes with it, and Q(DQ(v)) = v for the same scale
// and zero point, so the result is the same tensor exactly (quantized CNNs give MaxPool its
// input's scale). The DQ stays for any other reader.
bool fuse_max_pool(module& m, instruction_ref ins) {
    const auto& pool = ins->get_operator().get<op::pooling>();
    if (pool.mode != op::pooling_mode::max || ins->inputs().size() != 1) return false;
    auto x = activation_of(ins->inputs()[0]);
    if (!x || !(x->scales[0] > 0)) return false;
    auto u = sole_user(m, ins);
    if (!u || !is<op::quantize_linear_op>(*u) || (*u)->inputs().size() != 3) return false;
    auto q = *u;
    const auto& qop = q->get_operator().get<op::quantize_linear_op>();
    auto s = constant_of(q->inputs()[1]), z = constant_of(q->inputs()[2]);
    if (qop.block_size != 0 || qop.precision || !s || !z || s->get_shape().elements() != 1 ||
        z->get_shape().elements() != 1 || q->get_shape().get_type() != x->q->get_shape().get_type() ||
        static_cast<float>(rewrite::values_of(*s)[0]) != static_cast<float>(x->scales[0]) ||
        static_cast<std::int64_t>(rewrite::values_of(*z)[0]) != x->zero_point)
        return false;
    m.replace_instruction(q, pool, {x->q});
    return true;
}

// Whether `u` is a fused op reading `q` as its activation (x) only.
bool reads_as_x(instruction_ref u, instruction_ref q) {
    if (!(is<op::quant_convolution>(u) || is<op::quant_dot>(u)) || u->inputs()[0] != q) return false;
    return std::count(u->inputs().begin(), u->inputs().end(), q) == 1;  // not also w or a residual
}

template <class Op>
void shift_x_zero_point(module& m, instruction_ref u) {
    auto op = u->get_operator().get<Op>();
    op.x_zero_point += 128;
    m.replace_instruction(u, op, u->inputs());
}

// An int8 QuantizeLinear read only as the activation (x) of fused ops becomes uint8 with
// its zero point + 128: Q_u8(v; s, z + 128) = Q_s8(v; s, z) + 128 exactly (the saturation
// range shifts with it), so x - x_zero_point is unchanged. uint8 x is what VNNI's u8 x s8
// dot product takes; an int8 one costs oneDNN a compensation pass per product.
void activations_as_uint8(module& m) {
    for (auto q = m.begin(); q != m.end(); ++q) {
        if (!is<op::quantize_linear_op>(q) || q->inputs().size() != 3 || q->get_shape().get_type() != type::int8 ||
            q->outputs().empty() || rewrite::is_output(m, q))
            continue;
        auto z = constant_of(q->inputs()[2]);
        if (!z || z->get_shape().elements() != 1) continue;
        const auto users = q->outputs();
        if (!std::all_of(users.begin(), users.end(), [&](instruction_ref u) { return reads_as_x(u, q); })) continue;
        auto zp = m.insert_literal(q, rewrite::make_literal(shape(type::uint8, {}), {rewrite::values_of(*z)[0] + 128}));
        auto qop = q->get_operator().get<op::quantize_linear_op>();
        qop.output_type = type::uint8;
        m.replace_instruction(q, qop, {q->inputs()[0], q->inputs()[1], zp});
        for (auto u : users) {
            if (is<op::quant_convolution>(u)) shift_x_zero_point<op::quant_convolution>(m, u);
            else shift_x_zero_point<op::quant_dot>(m, u);
        }
    }
}

}  // namespace

void fuse_qdq::apply(module& m) const {
    fuse_int4_weights(m);
    std::vector<instruction_ref> products;
    for (auto it = m.begin(); it != m.end(); ++it)
        if (is<op::convolution>(it) || is<op::matmul>(it) || is<op::gemm>(it) || is<op::add_op>(it) ||
            is<op::pooling>(it))
            products.push_back(it);
    // An instruction of the list may have become a fused op meanwhile (a bias Add folded
    // into its matmul): each is asked again what it is.
    for (auto ins : products) {
        if (ins->get_shape().get_type() != type::float32) continue;
        if (is<op::convolution>(ins)) fuse_convolution(m, ins);
        else if (is<op::matmul>(ins)) fuse_matmul(m, ins);
        else if (is<op::add_op>(ins)) fuse_add(m, ins);
        else if (is<op::pooling>(ins)) fuse_max_pool(m, ins);
        else if (is<op::gemm>(ins)) fuse_gemm(m, ins);
    }
    dead_code_elimination{}.apply(m);  // the bypassed DequantizeLinears read the Q's type
    activations_as_uint8(m);
}

}  // namespace kiln
