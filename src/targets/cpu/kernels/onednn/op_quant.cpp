#include "targets/cpu/kernels/onednn/op_quant.hpp"

#include "targets/cpu/kernels/onednn/quant_real.hpp"
#include "targets/cpu/sum_post_op.hpp"

#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/quantize.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cfloat>
#include <optional>
#include <utility>

namespace kiln::cpu {

namespace {

using dt = dnnl::memory::data_type;

// The requantize of p as oneDNN attributes for a result whose channel dim is `channel_dim`
// (output scales, run-time zero points, the folded Relu/Clip).
// A residual (quant_convolution's has_residual) is oneDNN's in-place sum post-op before the
// clip: the output buffer holds r, and the kernel adds (r - r_zero_point) * r_scale / y_scale
// in output levels (its dst data type: lower_quant_convolution makes r and the result one
// type), then clips, adds the output zero point, rounds and saturates.
dnnl::primitive_attr quant_attr(const op::requantize_params& p, std::size_t channels, int channel_dim,
                                const op::quant_convolution* residual = nullptr,
                                const std::vector<float>& float_clamp = {}) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    std::vector<float> scales(p.w_scales.size() == 1 ? 1 : channels);
    for (std::size_t c = 0; c < scales.size(); ++c)
        scales[c] = p.channel_scale(c) / (p.quantized_output() ? p.y_scale : 1.0f);
    attr.set_output_scales(scales.size() == 1 ? 0 : 1 << channel_dim, scales);
    if (p.x_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (p.w_zero_point != 0) attr.set_zero_points(DNNL_ARG_WEIGHTS, 0, {DNNL_RUNTIME_S32_VAL});
    dnnl::post_ops po;
    bool any_post_op = false;
    if (residual && residual->has_residual) {
        po.append_sum(residual->r_scale / (p.quantized_output() ? p.y_scale : 1.0f),
                      static_cast<std::int32_t>(residual->r_zero_point));
        any_post_op = true;
    }
    if (p.quantized_output()) {
        if (p.y_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
        const std::int64_t lo = p.out_type == type::int8 ? -128 : 0, hi = p.out_type == type::int8 ? 127 : 255;
        if (p.y_min > lo || p.y_max < hi) {
            // Before the output zero point is added, in output levels.
            po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, static_cast<float>(p.y_min - p.y_zero_point),
                              static_cast<float>(p.y_max - p.y_zero_point));
            any_post_op = true;
        }
    } else if (float_clamp.size() == 2) {
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, float_clamp[0], float_clamp[1]);
        any_post_op = true;
    }
    if (any_post_op) attr.set_post_ops(po);
    return attr;
}

dnnl::memory s32_scalar(const dnnl::engine& eng, std::int64_t v) {
    dnnl::memory m({{1}, dt::s32, dnnl::memory::format_tag::a}, eng);
    *static_cast<std::int32_t*>(m.get_data_handle()) = static_cast<std::int32_t>(v);
    return m;
}

void bind_zero_points(primitive_kernel& k, const op::requantize_params& p, const dnnl::engine& eng) {
    if (p.x_zero_point != 0) k.bind_owned(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, s32_scalar(eng, p.x_zero_point));
    if (p.w_zero_point != 0)
        k.bind_owned(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_WEIGHTS, s32_scalar(eng, p.w_zero_point));
    if (p.quantized_output() && p.y_zero_point != 0)
        k.bind_owned(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST, s32_scalar(eng, p.y_zero_point));
}

// Constant weights reordered once into the layout the primitive wants.
void bind_weights(primitive_kernel& k, const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted,
                  const std::vector<argument>& constants, const dnnl::engine& eng, const std::string& op_name) {
    if (constants.size() <= 1 || constants[1].empty())
        throw_error(error_code::runtime, op_name + ": needs its constant weights to lay them out");
    k.bind_owned(DNNL_ARG_WEIGHTS, reorder_constant(eng, plain, constants[1].data(), wanted));
}

// Convolution weights [M, C/G, k...] as oneDNN sees them ([G, M/G, C/G, k...] when grouped).
dnnl::memory::desc conv_weights_md(const shape& w, std::int64_t group, bool any) {
    auto lens = w.lens();
    auto strides = w.strides();
    std::vector<std::size_t> dims, st;
    const auto G = static_cast<std::size_t>(std::max<std::int64_t>(group, 1));
    if (G > 1) {
        dims.push_back(G);
        st.push_back(lens[0] / G * strides[0]);
    }
    dims.push_back(lens[0] / G);
    st.push_back(strides[0]);
    for (std::size_t i = 1; i < lens.size(); ++i) {
        dims.push_back(lens[i]);
        st.push_back(strides[i]);
    }
    if (any) return dnnl::memory::desc(to_dims(dims), to_dnnl_type(w.get_type()), dnnl::memory::format_tag::any);
    return dnnl::memory::desc(to_dims(dims), to_dnnl_type(w.get_type()), to_dims(st));
}

}  // namespace

// The residual is no operand: it is the output buffer (the sum post-op works in place).
shape quant_conv::logical_shape(const std::vector<shape>& operands) const {
    auto o = op;
    o.has_residual = false;
    return o.compute_shape(operands);
}

dnnl::primitive_desc_base quant_conv::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                              const shape& dst) const {
    expect_plain();
    const bool real = !has_int8_dot_product();  // float inside (quant_real.hpp)
    const shape& x = operands.at(0);
    const shape& w = operands.at(1);
    auto g = op.conv_geom(op.name(), x, w);
    dnnl::memory::dims strides, dilates, pad_l, pad_r;
    for (std::size_t i = 0; i < g.rank(); ++i) {
        const std::int64_t span = (g.kernel[i] - 1) * g.dilation[i] + 1;
        strides.push_back(g.stride[i]);
        dilates.push_back(g.dilation[i] - 1);
        pad_l.push_back(g.pad_begin[i]);
        pad_r.push_back((g.out[i] - 1) * g.stride[i] + span - g.in[i] - g.pad_begin[i]);
    }
    if (!float_clamp.empty() && (float_clamp.size() != 2 || op.quantized_output()))
        throw_error(error_code::shape, name() + ": float_clamp takes [lo, hi] and a float32 result");
    auto attr = real ? quant_real::primitive_attr(op, op.has_residual, float_clamp)
                     : quant_attr(op, static_cast<std::size_t>(g.out_channels), 1, &op, float_clamp);
    auto wmd = conv_weights_md(w, g.group, true);
    auto xmd = md_of(x), bmd = op.has_bias ? md_of(operands.at(2)) : dnnl::memory::desc(), ymd = md_of(dst);
    if (real) {  // float32 in oneDNN's layouts for it; converted on the way in and out
        wmd = retyped(wmd, dt::f32);
        xmd = any_md(shape(type::float32, x.lens()));
        ymd = any_md(shape(type::float32, dst.lens()));
        if (op.has_bias) bmd = md_of(shape(type::float32, operands.at(2).lens()));
    }
    const auto prop = dnnl::prop_kind::forward_inference;
    const auto alg = dnnl::algorithm::convolution_direct;
    auto d = op.has_bias ? dnnl::convolution_forward::desc(prop, alg, xmd, wmd, bmd, ymd, strides, dilates, pad_l, pad_r)
                         : dnnl::convolution_forward::desc(prop, alg, xmd, wmd, ymd, strides, dilates, pad_l, pad_r);
    return dnnl::convolution_forward::primitive_desc(d, attr, eng);
}

void quant_conv::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                               const std::vector<shape>& operands, const std::vector<argument>& constants,
                               const dnnl::engine& eng) const {
    if (!has_int8_dot_product()) {
        const shape& w = operands.at(1);
        const std::size_t channels = w.lens().at(0);
        k.bind_converted(DNNL_ARG_SRC, 0, md_of(operands.at(0)), pd.src_desc(), eng,
                         quant_real::input_attr(op.x_scale, op.x_zero_point));
        const auto real_w = quant_real::weights(quant_real::constant(constants, 1, name()), op,
                                                w.elements() / channels, channels, name());
        k.bind_owned(DNNL_ARG_WEIGHTS, reorder_constant(eng, retyped(conv_weights_md(w, op.group, false), dt::f32),
                                                        real_w.data(), pd.weights_desc()));
        if (op.has_bias)
            k.bind_owned(DNNL_ARG_BIAS, quant_real::bias(quant_real::constant(constants, 2, name()), op, channels,
                                                         pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_BIAS), eng,
                                                         name()));
        // A residual: the output buffer's levels read back as real values into the float
        // result first (the sum post-op adds the product to them).
        if (op.has_residual)
            k.convert_output(quant_real::output_attr(op), true, quant_real::input_attr(op.r_scale, op.r_zero_point));
        else
            k.convert_output(quant_real::output_attr(op));
        return;
    }
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    bind_weights(k, conv_weights_md(operands.at(1), op.group, false), pd.weights_desc(), constants, eng, name());
    if (op.has_bias) k.bind(DNNL_ARG_BIAS, 2, md_of(operands.at(2)));
    bind_zero_points(k, op, eng);
}

shape quant_matmul::logical_shape(const std::vector<shape>& operands) const { return op.compute_shape(operands); }

namespace {

// Constant 2-D weights under a row-major a and result: the batch dims fold into the rows
// (one 2-D product; oneDNN then lays the weights out for its VNNI kernels, where a 3-D
// problem kept them plain: 0.07 ms for 128x256x256).
bool folds_rows(const quant_matmul& m, const std::vector<shape>& operands, const shape& dst) {
    return operands.at(1).ndim() == 2 && m.op.w_zero_point == 0 && operands.at(0).standard() && dst.standard();
}

dnnl::memory::desc rows_md(const shape& s) {
    const auto& l = s.lens();
    const std::size_t cols = l.back(), rows = s.elements() / std::max<std::size_t>(cols, 1);
    return md_of(shape(s.get_type(), {rows, cols}));
}

}  // namespace

dnnl::primitive_desc_base quant_matmul::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                                const shape& dst) const {
    expect_plain();
    const bool real = !has_int8_dot_product();  // float inside (quant_real.hpp)
    const bool fold = folds_rows(*this, operands, dst);
    const std::size_t r = fold ? 2 : dst.ndim();
    const bool constant_b = operands.at(1).ndim() == 2 && op.w_zero_point == 0;
    auto src = fold ? rows_md(operands.at(0)) : md_with_rank(operands.at(0), r);
    auto out = fold ? rows_md(dst) : md_of(dst);
    auto wei = md_with_rank(operands.at(1), r);
    if (real) {  // float32 in the same layouts; converted on the way in and out
        src = retyped(src, dt::f32);
        out = retyped(out, dt::f32);
        wei = retyped(wei, dt::f32);
    }
    if (constant_b) wei = dnnl::memory::desc(wei.dims(), wei.data_type(), dnnl::memory::format_tag::any);
    auto attr = real ? quant_real::primitive_attr(op)
                     : quant_attr(op, operands.at(1).lens().back(), static_cast<int>(r) - 1);
    if (op.has_bias) {
        auto lens = std::vector<std::size_t>(r, 1);
        lens.back() = operands.at(2).elements();
        auto bias = md_of(shape(type::float32, lens));
        return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, out), attr, eng);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, out), attr, eng);
}

void quant_matmul::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                                 const std::vector<shape>& operands, const std::vector<argument>& constants,
                                 const dnnl::engine& eng) const {
    const std::size_t r = pd.dst_desc().dims().size();
    if (!has_int8_dot_product()) {
        bind_real_operands(k, pd, operands, constants, eng, r);
        return;
    }
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    const bool constant_b = operands.at(1).ndim() == 2 && op.w_zero_point == 0 && constants.size() > 1 &&
                            !constants[1].empty();
    if (constant_b) bind_weights(k, md_with_rank(operands.at(1), r), pd.weights_desc(), constants, eng, name());
    else k.bind(DNNL_ARG_WEIGHTS, 1, pd.weights_desc());
    if (op.has_bias) k.bind(DNNL_ARG_BIAS, 2, pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_BIAS));
    bind_zero_points(k, op, eng);
}

void quant_matmul::bind_real_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                                      const std::vector<shape>& operands, const std::vector<argument>& constants,
                                      const dnnl::engine& eng, std::size_t r) const {
    const shape& a = operands.at(0);
    const shape& b = operands.at(1);
    // The float product's src is the 8-bit one's layout (make_pd), retyped.
    k.bind_converted(DNNL_ARG_SRC, 0, retyped(pd.src_desc(), to_dnnl_type(a.get_type())), pd.src_desc(), eng,
                     quant_real::input_attr(op.x_scale, op.x_zero_point));
    const std::size_t n = b.lens().back();
    if (constants.size() > 1 && !constants[1].empty()) {
        const auto real_b = quant_real::weights(constants[1], op, 1, n, name());
        k.bind_owned(DNNL_ARG_WEIGHTS,
                     reorder_constant(eng, retyped(md_with_rank(b, r), dt::f32), real_b.data(), pd.weights_desc()));
    } else {
        if (op.w_scales.size() != 1)
            throw_error(error_code::runtime, name() + ": per-column scales need constant weights");
        k.bind_converted(DNNL_ARG_WEIGHTS, 1, md_with_rank(b, r), pd.weights_desc(), eng,
                         quant_real::input_attr(op.w_scales[0], op.w_zero_point));
    }
    if (op.has_bias)
        k.bind_owned(DNNL_ARG_BIAS, quant_real::bias(quant_real::constant(constants, 2, name()), op, n,
                                                     pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_BIAS), eng,
                                                     name()));
    k.convert_output(quant_real::output_attr(op));
}

shape quant_reorder::logical_shape(const std::vector<shape>& operands) const {
    if (operands.size() != 1) throw_error(error_code::shape, name() + ": expected one operand");
    return shape(out_type, operands[0].lens());
}

dnnl::primitive_desc_base quant_reorder::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                                 const shape& dst) const {
    expect_plain();
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (scale != 1.0f) attr.set_output_scales(0, {scale});
    if (src_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {static_cast<std::int32_t>(src_zero_point)});
    if (dst_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<std::int32_t>(dst_zero_point)});
    return dnnl::reorder::primitive_desc(eng, md_of(operands.at(0)), eng, md_of(dst), attr);
}

void quant_reorder::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base&,
                                  const std::vector<shape>& operands, const std::vector<argument>&,
                                  const dnnl::engine&) const {
    k.bind(DNNL_ARG_FROM, 0, md_of(operands.at(0)));
}

namespace {

bool is_8bit(type t) { return t == type::int8 || t == type::uint8; }

bool dnnl_int8_or_f32(type t) { return is_8bit(t) || t == type::int32 || t == type::float32; }

bool all_static(instruction_ref ins) {
    if (!ins->get_shape().is_tensor() || ins->get_shape().dynamic() || ins->get_shape().elements() == 0) return false;
    for (auto in : ins->inputs())
        if (!in->get_shape().is_tensor() || in->get_shape().dynamic() || in->get_shape().elements() == 0 ||
            !dnnl_int8_or_f32(in->get_shape().get_type()))
            return false;
    return true;
}

// Whether the integer ops become int8 kernels: where oneDNN has VNNI, or everywhere when
// KILN_CPU_INT8_KERNELS=all asks (float inside them without VNNI: quant_real.hpp).
bool int8_kernels(const lower_env& env) {
    return has_int8_dot_product() || env.ctx.options().int8_kernels == int8_kernel_choice::onednn_everywhere;
}

// x in the IR strides `want` (an 8-bit plain tensor): x, or a quant_reorder before pos.
instruction_ref with_strides(lower_env& env, instruction_ref pos, instruction_ref x, const shape& want) {
    if (x->get_shape().strides() == want.strides()) return x;
    quant_reorder r;
    r.out_type = x->get_shape().get_type();
    auto buf = env.m.insert_instruction(pos, builtin::allocate{want}, {});
    return env.m.insert_instruction(pos, r, {x, buf});
}

// The bias in accumulator units: int32 as it is, float32 divided by x_scale * w_scale.
instruction_ref accumulator_bias(lower_env& env, instruction_ref pos, instruction_ref b,
                                 const op::requantize_params& p) {
    auto v = rewrite::values_of(b->get_literal());
    if (b->get_shape().get_type() == type::float32)
        for (std::size_t c = 0; c < v.size(); ++c) v[c] /= static_cast<double>(p.channel_scale(c));
    return env.constant(pos, rewrite::make_literal(shape(type::float32, {v.size()}), v));
}

}  // namespace


// The output buffer of a quant_conv with a residual r (the sum post-op reads it in place):
// r itself where it may be overwritten (sum_post_op.hpp's may_write_into: a cpu kernel's
// result in its own planned buffer, read by nothing after `ins`, neither a parameter nor
// a literal nor returned) and laid out as the result; otherwise a copy of r into a new
// buffer of the result's layout (a quant_reorder before `ins`: one pass over an 8-bit
// tensor, still cheaper than the quant_add it replaces); a copy too where the convolution
// reads r itself (as its x). Nothing when r is not of the
// result's type (quantize_int8 makes both uint8) or the result is float32.
static std::optional<instruction_ref> residual_buffer(lower_env& env, instruction_ref ins, instruction_ref r,
                                                      const std::vector<instruction_ref>& operands, const shape& dst) {
    const auto& rs = r->get_shape();
    if (!dst.is_tensor() || !is_8bit(dst.get_type()) || rs.get_type() != dst.get_type() || rs.lens() != dst.lens())
        return std::nullopt;
    // Not when the convolution also reads r (as its x: a block whose only convolution reads
    // the block input): the kernel would overwrite what it still reads.
    const bool operand = std::find(operands.begin(), operands.end(), r) != operands.end() ||
                         std::find(ins->inputs().begin(), ins->inputs().end() - 1, r) != ins->inputs().end() - 1;
    if (!operand && !in_dnnl_layout(env, r) && rs.strides() == dst.strides() && rs.bytes() >= dst.bytes() &&
        env.ctx.options().sum_post_op && may_write_into(env, r, ins, {}))
        return r;
    if (in_dnnl_layout(env, r)) r = plain(env, r);
    quant_reorder copy;
    copy.out_type = dst.get_type();
    auto buf = env.m.insert_instruction(ins, builtin::allocate{dst}, {});
    return env.m.insert_instruction(ins, copy, {r, buf});
}

bool has_int8_dot_product() {
    using isa = dnnl::cpu_isa;
    const auto i = dnnl::get_effective_cpu_isa();
    return i == isa::avx512_core_vnni || i == isa::avx512_core_bf16 || i == isa::avx512_core_amx ||
           i == isa::avx2_vnni;
}

namespace {

// The Relu or Clip with constant bounds that is the only reader of a float result (neither of
// them a program output), and its [lo, hi].
std::optional<std::pair<instruction_ref, std::vector<float>>> clamp_after(lower_env& env, instruction_ref ins) {
    if (ins->outputs().size() != 1 || rewrite::is_output(env.m, ins)) return std::nullopt;
    auto r = ins->outputs().front();
    if (rewrite::is_output(env.m, r)) return std::nullopt;  // a result keeps its own (row-major) buffer
    if (r->inputs().empty() || r->inputs()[0] != ins || !r->get_shape().same_lens_and_type(ins->get_shape()))
        return std::nullopt;
    if (r->get_operator().any_cast<op::relu_op>()) return std::make_pair(r, std::vector<float>{0.0f, FLT_MAX});
    if (!r->get_operator().any_cast<op::clip_op>() || r->inputs().size() != 3 ||
        std::count(r->inputs().begin(), r->inputs().end(), ins) != 1)
        return std::nullopt;
    auto a = rewrite::constant_of(r->inputs()[1]), b = rewrite::constant_of(r->inputs()[2]);
    if (!a || !b || a->get_shape().elements() != 1 || b->get_shape().elements() != 1) return std::nullopt;
    const double lo = rewrite::values_of(*a)[0], hi = rewrite::values_of(*b)[0];
    if (!(lo <= hi)) return std::nullopt;
    return std::make_pair(r, std::vector<float>{static_cast<float>(lo), static_cast<float>(hi)});
}

}  // namespace

bool lower_quant_convolution(lower_env& env, instruction_ref ins) {
    const auto* q = ins->get_operator().any_cast<op::quant_convolution>();
    if (!q || !all_static(ins) || in_dnnl_layout(env, ins->inputs()[0]) || !int8_kernels(env)) return false;
    auto w = ins->inputs()[1];
    if (!w->is_literal() || w->get_shape().get_type() != type::int8 || q->w_zero_point != 0) return false;
    const auto& lens = ins->get_shape().lens();
    quant_conv op;
    op.op = *q;
    auto xl = ins->inputs()[0]->get_shape();
    auto x = with_strides(env, ins, ins->inputs()[0],
                          shape(xl.get_type(), xl.lens(), channels_last_strides(xl.lens())));
    std::vector<instruction_ref> operands{x, w};
    if (q->has_bias) operands.push_back(accumulator_bias(env, ins, ins->inputs()[2], *q));
    // Channels-last between the fused ops (oneDNN's fast int8 layout); a program result row-major.
    const shape dst = rewrite::is_output(env.m, ins) ? shape(q->out_type, lens)
                                                     : shape(q->out_type, lens, channels_last_strides(lens));
    std::optional<instruction_ref> out;
    if (q->has_residual) {
        out = residual_buffer(env, ins, ins->inputs()[q->residual_index()], operands, dst);
        if (!out) return false;
    }
    // A float result read only by a Relu or Clip (quantize_int8 leaves MobileNetV2's last
    // convolution float for the pooling after it, its ReLU6 apart): the clamp in the kernel,
    // the Relu/Clip left dead (its readers read this result).
    auto clamp = q->quantized_output() || q->has_residual ? std::nullopt : clamp_after(env, ins);
    if (clamp) op.float_clamp = clamp->second;
    if (!emit(env, ins, op, operands, dst, out)) return false;
    if (clamp) {
        env.m.replace_instruction(clamp->first, ins);
        env.dead.push_back(clamp->first);
    }
    return true;
}

bool lower_quant_dot(lower_env& env, instruction_ref ins) {
    const auto* q = ins->get_operator().any_cast<op::quant_dot>();
    if (!q || !all_static(ins) || !int8_kernels(env)) return false;
    for (auto in : ins->inputs())
        if (in_dnnl_layout(env, in)) return false;
    auto b = ins->inputs()[1];
    if (b->get_shape().get_type() != type::int8) return false;
    if (b->get_shape().ndim() == 2 && q->w_zero_point == 0 && !b->is_literal()) return false;
    if (q->w_scales.size() > 1 && !b->is_literal()) return false;
    quant_matmul op;
    op.op = *q;
    std::vector<instruction_ref> operands{ins->inputs()[0], b};
    if (q->has_bias) operands.push_back(accumulator_bias(env, ins, ins->inputs()[2], *q));
    return emit(env, ins, op, operands, shape(q->out_type, ins->get_shape().lens()));
}

namespace {

// One literal value of input i, when present and per tensor.
std::optional<double> scalar_input(instruction_ref ins, std::size_t i) {
    if (ins->inputs().size() <= i) return 0.0;
    auto l = rewrite::constant_of(ins->inputs()[i]);
    if (!l || l->get_shape().elements() != 1) return std::nullopt;
    return rewrite::values_of(*l)[0];
}

// The result in the strides of its input (a channels-last activation stays so); a
// program result row-major.
shape like_input(lower_env& env, instruction_ref ins) {
    const auto& x = ins->inputs()[0]->get_shape();
    if (rewrite::is_output(env.m, ins)) return shape(ins->get_shape().get_type(), x.lens());
    return shape(ins->get_shape().get_type(), x.lens(), strides_like(x, x.lens()));
}

}  // namespace

namespace {

// Q or DQ as one pass (quant_linear_kernel) when x is packed, else a oneDNN reorder.
bool emit_quant_linear(lower_env& env, instruction_ref ins, quant_linear_kernel k, const quant_reorder& fallback) {
    const auto& x = ins->inputs()[0]->get_shape();
    const shape out = like_input(env, ins);
    if (!x.packed() || out.strides() != x.strides()) return emit(env, ins, fallback, {ins->inputs()[0]}, out);
    auto buf = env.m.insert_instruction(ins, builtin::allocate{out}, {});
    env.m.replace_instruction(ins, k, {ins->inputs()[0], buf});
    return true;
}

// Whether x (an image batch of few channels, row-major NCHW) is quantized only for quantized
// convolutions that read it as their activation: each reads it channels-last, which
// with_strides would otherwise reorder it into (a second pass over the 8-bit copy).
bool quantizes_into_channels_last(lower_env& env, instruction_ref ins) {
    const auto& x = ins->inputs()[0]->get_shape();
    if (x.ndim() != 4 || !x.standard() || x.lens()[1] > quant_linear_kernel::max_interleaved_channels ||
        ins->outputs().empty() || rewrite::is_output(env.m, ins))
        return false;
    for (auto r : ins->outputs())
        if (!r->get_operator().any_cast<op::quant_convolution>() ||
            std::count(r->inputs().begin(), r->inputs().end(), ins) != 1 || r->inputs()[0] != ins)
            return false;
    return true;
}

}  // namespace

bool lower_quantize_linear(lower_env& env, instruction_ref ins) {
    const auto* q = ins->get_operator().any_cast<op::quantize_linear_op>();
    if (!q || !all_static(ins) || q->block_size != 0 || q->precision) return false;
    const auto s = scalar_input(ins, 1), z = scalar_input(ins, 2);
    if (!s || !z || !is_8bit(ins->get_shape().get_type()) || ins->inputs()[0]->get_shape().get_type() != type::float32)
        return false;
    // A float convolution's result in a blocked oneDNN layout (dequantize_without_vnni on AVX2):
    // quantized from its row-major copy.
    if (auto x = ins->inputs()[0]; in_dnnl_layout(env, x)) env.m.replace_argument(ins, x, plain(env, x));
    quant_reorder op;
    op.scale = static_cast<float>(1.0 / *s);
    op.dst_zero_point = static_cast<std::int64_t>(*z);
    op.out_type = ins->get_shape().get_type();
    quant_linear_kernel k;
    k.scale = static_cast<float>(*s);
    k.zero_point = op.dst_zero_point;
    k.out_type = op.out_type;
    if (env.ctx.options().input_reorder && quantizes_into_channels_last(env, ins)) {
        const auto& lens = ins->get_shape().lens();
        k.channels_last = true;
        auto buf = env.m.insert_instruction(ins, builtin::allocate{shape(k.out_type, lens, channels_last_strides(lens))}, {});
        env.m.replace_instruction(ins, k, {ins->inputs()[0], buf});
        return true;
    }
    return emit_quant_linear(env, ins, k, op);
}

bool lower_dequantize_linear(lower_env& env, instruction_ref ins) {
    const auto* d = ins->get_operator().any_cast<op::dequantize_linear_op>();
    if (!d || !all_static(ins) || d->block_size != 0 || ins->get_shape().get_type() != type::float32) return false;
    const auto s = scalar_input(ins, 1), z = scalar_input(ins, 2);
    if (!s || !z || !is_8bit(ins->inputs()[0]->get_shape().get_type())) return false;
    quant_reorder op;
    op.scale = static_cast<float>(*s);
    op.src_zero_point = static_cast<std::int64_t>(*z);
    quant_linear_kernel k;
    k.dequantize = true;
    k.scale = op.scale;
    k.zero_point = op.src_zero_point;
    k.out_type = type::float32;
    return emit_quant_linear(env, ins, k, op);
}

bool lower_quant_add(lower_env& env, instruction_ref ins) {
    const auto* q = ins->get_operator().any_cast<op::quant_add>();
    if (!q || !all_static(ins)) return false;
    const auto& a = ins->inputs()[0]->get_shape();
    const auto& b = ins->inputs()[1]->get_shape();
    const auto t = ins->get_shape().get_type();
    if (a.get_type() != t || b.get_type() != t || !a.packed() || a.strides() != b.strides() ||
        in_dnnl_layout(env, ins->inputs()[0]) || in_dnnl_layout(env, ins->inputs()[1]))
        return false;
    const bool result = rewrite::is_output(env.m, ins);
    if (result && !a.standard()) return false;
    quant_add_kernel k;
    k.op = *q;
    auto buf = env.m.insert_instruction(ins, builtin::allocate{shape(t, a.lens(), a.strides())}, {});
    env.m.replace_instruction(ins, k, {ins->inputs()[0], ins->inputs()[1], buf});
    return true;
}

KILN_REGISTER_OP(quant_conv)
KILN_REGISTER_OP(quant_matmul)
KILN_REGISTER_OP(quant_reorder)

}  // namespace kiln::cpu
