// The oneDNN forms of the ops that are not convolutions or matrix products (lower_ops.hpp).
#include "targets/cpu/lower_ops.hpp"
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/onednn/op_misc.hpp"

#include "ops/nn_pooling.hpp"
#include "ops/normalization.hpp"
#include "ops/reduce.hpp"
#include "ops/softmax.hpp"
#include "ops/tensor_resize.hpp"

#include <algorithm>
#include <map>

namespace kiln::cpu {

namespace {

// The result in x's layout (ops whose oneDNN form has one data descriptor).
std::optional<shape> same_layout(instruction_ref x) {
    const auto& s = x->get_shape();
    if (!s.packed()) return std::nullopt;
    return s;
}

// Same, for ops that may read a oneDNN layout: the op writes x's layout.
template <class Op>
std::optional<shape> same_layout(lower_env& env, instruction_ref x, Op& op) {
    if (in_dnnl_layout(env, x)) {
        op.dst_layout = env.layout.at(&*x);
        return x->get_shape().as_standard();
    }
    return same_layout(x);
}

}  // namespace

bool lower_pooling(lower_env& env, instruction_ref ins) {
    const auto* p = ins->get_operator().any_cast<op::pooling>();
    if (!p || p->mode == op::pooling_mode::lp || ins->inputs().size() != 1) return false;
    auto x = ins->inputs()[0];
    if (x->get_shape().ndim() < 3) return false;
    const auto& out = ins->get_shape().lens();
    pooling op;
    op.op = ins->get_operator();
    // From a oneDNN layout, oneDNN chooses the output's (the same, blocked).
    op.any_dst = in_dnnl_layout(env, x);
    return emit(env, ins, op, {x}, shape(type::float32, out, strides_like(x->get_shape(), out)));
}

bool lower_pooling_8bit(lower_env& env, instruction_ref ins) {
    const auto* p = ins->get_operator().any_cast<op::pooling>();
    if (!p || p->mode != op::pooling_mode::max || ins->inputs().size() != 1) return false;
    auto x = ins->inputs()[0];
    const auto& s = x->get_shape();
    const type t = s.get_type();
    if ((t != type::uint8 && t != type::int8) || s.dynamic() || ins->get_shape().dynamic() || s.ndim() < 3 ||
        !s.packed() || in_dnnl_layout(env, x))
        return false;
    const auto& out = ins->get_shape().lens();
    pooling op;
    op.op = ins->get_operator();
    return emit(env, ins, op, {x}, shape(t, out, strides_like(s, out)));
}

bool lower_softmax(lower_env& env, instruction_ref ins, bool log) {
    const auto& s = ins->get_operator().to_value();
    softmax op;
    op.axis = s.at("axis").get_int64();
    op.log = log;
    auto x = plain(env, ins->inputs().at(0));
    return emit(env, ins, op, {x}, packed_like(x->get_shape()));
}

bool lower_layer_norm(lower_env& env, instruction_ref ins) {
    const auto& ln = ins->get_operator().get<op::layer_norm>();
    auto operands = ins->inputs();
    for (auto& o : operands) o = plain(env, o);
    auto dst = same_layout(operands[0]);
    if (!dst) return false;
    layer_norm op;
    op.axis = ln.axis;
    op.epsilon = ln.epsilon;
    op.has_bias = operands.size() == 3;
    if (emit(env, ins, op, operands, *dst)) return true;
    // oneDNN normalizes dense trailing dims only. A permuted view (ConvNeXt's LayerNorm over the
    // channels of x.permute(0, 2, 3, 1): the normalized axis has stride H*W) is copied row-major
    // first, rather than left to the reference kernel (28.5 of 61 ms in ConvNeXt-T on a Zen 5).
    if (operands[0]->get_shape().standard()) return false;
    operands[0] = ensure_layout(env, ins, operands[0], operands[0]->get_shape().as_standard());
    return emit(env, ins, op, operands, operands[0]->get_shape());
}

bool lower_batch_norm(lower_env& env, instruction_ref ins) {
    const auto& bn = ins->get_operator().get<op::batch_norm_inference>();
    auto x = ins->inputs().at(0);
    batch_norm op;
    auto dst = same_layout(env, x, op);
    if (!dst || ins->inputs().size() != 5) return false;
    op.epsilon = bn.epsilon;
    return emit(env, ins, op, ins->inputs(), *dst);
}

bool lower_lrn(lower_env& env, instruction_ref ins) {
    const auto& l = ins->get_operator().get<op::lrn>();
    auto x = ins->inputs().at(0);
    lrn op;
    auto dst = same_layout(env, x, op);
    if (!dst || x->get_shape().ndim() < 3) return false;
    op.alpha = l.alpha;
    op.beta = l.beta;
    op.bias = l.bias;
    op.size = l.size;
    return emit(env, ins, op, {x}, *dst);
}

bool lower_reduce(lower_env& env, instruction_ref ins, const std::string& n) {
    // Not max/min: oneDNN starts them from -FLT_MAX/FLT_MAX, so a row of infinities
    // reduces to a finite value (masked attention rows test exactly that).
    static const std::map<std::string, std::pair<std::string, float>> algs{
        {"reduce_sum", {"sum", 0.0f}},          {"reduce_mean", {"mean", 0.0f}},
        {"reduce_prod", {"mul", 0.0f}},         {"reduce_l1", {"norm_lp_sum", 1.0f}},
        {"reduce_l2", {"norm_lp_sum", 2.0f}},   {"reduce_sum_square", {"norm_lp_power_p_sum", 2.0f}}};
    auto it = algs.find(n);
    if (it == algs.end() || ins->inputs().size() != 1) return false;
    const auto v = ins->get_operator().to_value();
    reduction op;
    for (const auto& a : v.at("axes").get_array()) op.axes.push_back(a.get_int64());
    if (op.axes.empty()) return false;  // reduces nothing: a copy
    op.algorithm = it->second.first;
    op.p = it->second.second;
    op.out_lens = ins->get_shape().lens();
    // oneDNN 2.6 has jit reductions for some axis patterns only; the rest (a mean over the
    // sequence of [1, 128, 256]: 0.47 ms) get its reference code, slower than a generated kernel.
    const bool refuse_reference = ins->get_shape().get_type() == type::float32;
    return emit(env, ins, op, {plain(env, ins->inputs()[0])}, ins->get_shape().as_standard(), std::nullopt,
                refuse_reference);
}

bool lower_concat(lower_env& env, instruction_ref ins) {
    auto axis = ins->get_operator().to_value().at("axis").get_int64();
    const auto rank = static_cast<std::int64_t>(ins->get_shape().ndim());
    if (axis < 0) axis += rank;
    concat op;
    op.axis = axis;
    const auto& first = ins->inputs().front()->get_shape();
    const auto& out = ins->get_shape().lens();
    const shape dst(type::float32, out, strides_like(first, out));
    auto operands = ins->inputs();
    if (std::any_of(operands.begin(), operands.end(), [&](auto x) { return in_dnnl_layout(env, x); })) {
        op.any_dst = true;
        if (emit(env, ins, op, operands, dst)) return true;
        op.any_dst = false;
        for (auto& x : operands) x = plain(env, x);
    }
    return emit(env, ins, op, operands, dst);
}

// Resize where oneDNN resampling computes exactly what ONNX does: linear with half-pixel
// centres, and nearest for integer upscaling with half-pixel centres (any rounding) or
// asymmetric coordinates rounded down.
bool lower_resize(lower_env& env, instruction_ref ins) {
    const auto* r = ins->get_operator().any_cast<op::resize>();
    if (!r || ins->inputs().size() != 1) return false;
    const auto& o = r->options;
    auto x = ins->inputs()[0];
    const auto& in = x->get_shape().lens();
    if (o.antialias || in.size() < 3) return false;
    auto g = op::resize_shape(o, in, r->scales, r->sizes, "resize");
    if (g.out[0] != in[0] || g.out[1] != in[1]) return false;
    const auto& ctm = o.coordinate_transformation_mode;
    std::string alg;
    for (std::size_t d = 2; d < in.size(); ++d) {
        const double ratio = static_cast<double>(g.out[d]) / static_cast<double>(in[d]);
        if (g.scales.size() == in.size() && g.scales[d] != ratio) return false;
        if (ctm == "pytorch_half_pixel" && g.out[d] == 1) return false;
    }
    const bool half_pixel = ctm == "half_pixel" || ctm == "pytorch_half_pixel";
    if (o.mode == "linear" && half_pixel) {
        alg = "linear";
    } else if (o.mode == "nearest") {
        for (std::size_t d = 2; d < in.size(); ++d)
            if (g.out[d] % in[d] != 0) return false;
        const auto& nm = o.nearest_mode;
        const bool ok = (half_pixel && (nm == "round_prefer_floor" || nm == "round_prefer_ceil")) ||
                        (ctm == "asymmetric" && nm == "floor");
        if (!ok) return false;
        alg = "nearest";
    } else {
        return false;
    }
    resampling op;
    op.algorithm = alg;
    op.out_lens = g.out;
    op.any_dst = in_dnnl_layout(env, x);
    return emit(env, ins, op, {x}, shape(type::float32, g.out, strides_like(x->get_shape(), g.out)));
}

bool lower_binary(lower_env& env, instruction_ref ins, const std::string& n) {
    if (ins->inputs().size() != 2) return false;
    auto a = ins->inputs()[0];
    auto b = ins->inputs()[1];
    const auto& out = ins->get_shape().lens();
    if (a->get_shape().lens() != out) {
        if (!ins->get_operator().traits().commutative || b->get_shape().lens() != out) return false;
        std::swap(a, b);
    }
    binary op;
    op.algorithm = n;
    // oneDNN 2.6's binary has jit kernels for a few broadcast forms (per tensor, per
    // channel, ...); others (Swin's [1, 64, 1, 49, 49] mask over the heads axis) get its
    // reference code, 10-50x slower than the generated kernel codegen then makes.
    const bool refuse_reference = ins->get_shape().get_type() == type::float32;
    if (in_dnnl_layout(env, a)) {
        // In a's layout: b too when it has a's lens; a broadcast b as it is, else plain.
        op.dst_layout = env.layout.at(&*a);
        const bool full = b->get_shape().lens() == out;
        auto bb = full ? to_layout(env, ins, b, layout_md(env, a)) : b;
        if (emit(env, ins, op, {a, bb}, a->get_shape().as_standard(), std::nullopt, refuse_reference)) return true;
        if (!full && in_dnnl_layout(env, b) && emit(env, ins, op, {a, plain(env, b)}, a->get_shape().as_standard(), std::nullopt,
                                          refuse_reference))
            return true;
        op.dst_layout = {};
        a = plain(env, a);
        b = plain(env, b);
    } else if (in_dnnl_layout(env, b)) {
        b = plain(env, b);
    }
    return emit(env, ins, op, {a, b}, packed_like(a->get_shape()), std::nullopt, refuse_reference);
}

bool lower_eltwise(lower_env& env, instruction_ref ins) {
    auto ops = eltwise_post_ops(ins);
    if (!ops) return false;
    auto x = ins->inputs()[0];
    eltwise op;
    op.ops = *ops;
    auto dst = same_layout(env, x, op);
    if (!dst || !f32_static(x)) return false;
    return emit(env, ins, op, {x}, *dst);
}

// gather at one constant index: a strided window of the data, copied.
bool lower_gather(lower_env& env, instruction_ref ins) {
    if (ins->inputs().size() != 2) return false;
    auto data = plain(env, ins->inputs()[0]), idx = ins->inputs()[1];
    const auto& ds = data->get_shape();
    if (!f32_static(data) || !f32_static(ins) || !idx->is_literal() || idx->get_shape().elements() != 1 ||
        idx->get_shape().ndim() > 1)
        return false;
    auto axis = ins->get_operator().to_value().at("axis").get_int64();
    const auto rank = static_cast<std::int64_t>(ds.ndim());
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return false;
    const auto a = static_cast<std::size_t>(axis);
    auto i = idx->get_literal().get_argument().get_int64(0);
    const auto n = static_cast<std::int64_t>(ds.lens()[a]);
    if (i < 0) i += n;
    if (i < 0 || i >= n) return false;
    auto lens = ds.lens();
    auto strides = ds.strides();
    if (idx->get_shape().ndim() == 0) {
        lens.erase(lens.begin() + axis);
        strides.erase(strides.begin() + axis);
    } else {
        lens[a] = 1;
    }
    reorder op;
    op.view = shape(type::float32, lens, strides);
    op.offset = static_cast<std::size_t>(i) * ds.strides()[a];
    if (op.view->lens() != ins->get_shape().lens()) return false;
    return emit(env, ins, op, {data}, ins->get_shape().as_standard());
}

// reshape / flatten of a tensor that is not row-major: a copy into row-major order.
bool lower_reshape_copy(lower_env& env, instruction_ref ins) {
    auto x = ins->inputs().at(0);
    if (ins->get_operator().output_alias(to_shapes(ins->inputs())) >= 0) return false;  // a view
    reorder op;
    op.out_lens = ins->get_shape().lens();
    return emit(env, ins, op, {x}, ins->get_shape().as_standard());
}

}  // namespace kiln::cpu
