#include "targets/cpu/kernels/onednn/op_conv.hpp"

#include "ops/nn_conv.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>

namespace kiln::cpu {

bool convolution::transposed() const { return op.any_cast<op::deconvolution>() != nullptr; }

namespace {

struct window {
    dnnl::memory::dims strides, dilates, pad_l, pad_r;
    std::int64_t group = 1;
};

// oneDNN's geometry of the wrapped op: dilation counts the gaps (IR dilation - 1), and
// the end padding is whatever makes the output come out at its IR size.
window geometry_of(const operation& op, const shape& x, const shape& w) {
    window g;
    if (const auto* c = op.any_cast<op::convolution>()) {
        auto geo = c->conv_geom(c->name(), x, w);
        g.group = geo.group;
        for (std::size_t i = 0; i < geo.rank(); ++i) {
            const std::int64_t span = (geo.kernel[i] - 1) * geo.dilation[i] + 1;
            g.strides.push_back(geo.stride[i]);
            g.dilates.push_back(geo.dilation[i] - 1);
            g.pad_l.push_back(geo.pad_begin[i]);
            g.pad_r.push_back((geo.out[i] - 1) * geo.stride[i] + span - geo.in[i] - geo.pad_begin[i]);
        }
        return g;
    }
    if (const auto* d = op.any_cast<op::deconvolution>()) {
        auto geo = d->deconv_geom(x, w);
        g.group = geo.group;
        const std::size_t r = geo.rank();
        for (std::size_t i = 0; i < r; ++i) {
            const std::int64_t span = (geo.kernel[i] - 1) * geo.dilation[i] + 1;
            g.strides.push_back(geo.stride[i]);
            g.dilates.push_back(geo.dilation[i] - 1);
            g.pad_l.push_back(geo.pad_begin[i]);
            g.pad_r.push_back((geo.in[i] - 1) * geo.stride[i] + span - geo.pad_begin[i] - geo.out[i]);
        }
        return g;
    }
    throw_error(error_code::parse, "cpu::convolution: wraps '" + op.name() +
                                       "', expected a convolution or deconvolution");
}

// The IR op's operands: a bf16 source (bf16_activations.hpp) as the weights' float type.
std::vector<shape> ir_operands(const convolution& c, const std::vector<shape>& operands) {
    shape x = operands.at(0);
    if (x.get_type() == type::bfloat16 && c.weights_shape.get_type() != type::bfloat16)
        x = x.with_type(c.weights_shape.get_type());
    std::vector<shape> ir{x, c.weights_shape};
    if (c.has_bias) ir.push_back(operands.at(2));
    return ir;
}

// The result of the depthwise post-op over the 1x1 result `mid` (N, C, H, W).
shape depthwise_result(const std::string& name, const depthwise_post_op& dw, const shape& mid) {
    const auto& l = mid.lens();
    const auto& wl = dw.weights_shape.lens();
    if (l.size() != 4 || wl.size() != 4 || wl[0] != l[1] || wl[1] != 1 ||
        wl[2] != static_cast<std::size_t>(dw.kernel) || wl[3] != static_cast<std::size_t>(dw.kernel) ||
        dw.stride < 1 || dw.pad < 0)
        throw_error(error_code::shape, name + ": depthwise post-op weights " + dw.weights_shape.to_string() +
                                           " (kernel " + std::to_string(dw.kernel) + ") do not fit its input " +
                                           mid.to_string());
    for (const auto& p : dw.post_ops)
        if (p.kind != "eltwise")
            throw_error(error_code::parse, name + ": the depthwise post-op takes eltwise post-ops only");
    auto out = l;
    const auto s = static_cast<std::size_t>(dw.stride);
    out[2] = (l[2] + s - 1) / s;
    out[3] = (l[3] + s - 1) / s;
    return shape(mid.get_type(), out);
}

}  // namespace

dnnl::memory::desc depthwise_post_op::plain_md() const {
    const auto& wl = weights_shape.lens();
    return dnnl::memory::desc(to_dims(std::vector<std::size_t>{wl.at(0), 1, 1, wl.at(2), wl.at(3)}),
                              to_dnnl_type(weights_shape.get_type()), dnnl::memory::format_tag::goihw);
}

shape convolution::logical_shape(const std::vector<shape>& operands) const {
    const std::size_t want = extra_operand();
    if (operands.size() < want)
        throw_error(error_code::shape, name() + ": expected x, w" + std::string(has_bias ? ", b" : "") +
                                           std::string(dw.active() ? ", dw_w" : "") +
                                           std::string(dw.has_bias ? ", dw_b" : "") + ", got " +
                                           std::to_string(operands.size()) + " operands");
    if (weights.empty() && !operands[1].same_lens_and_type(weights_shape))
        throw_error(error_code::shape, name() + ": weights " + operands[1].to_string() + " differ from " +
                                           weights_shape.to_string());
    shape out = op.compute_shape(ir_operands(*this, operands));
    if (bf16_result()) {
        if (dw.active()) throw_error(error_code::parse, name() + ": a bf16 result with a depthwise post-op");
        return out.with_type(type::bfloat16);
    }
    if (!dw.active()) return out;
    if (transposed() || weights.empty() || dw.weights.empty())
        throw_error(error_code::parse, name() + ": a depthwise post-op needs a convolution with constant weights");
    return depthwise_result(name(), dw, out);
}

dnnl::memory::desc convolution::weights_md(bool any) const {
    const auto& wl = weights_shape.lens();
    const auto& ws = weights_shape.strides();
    const std::size_t r = wl.size();
    std::int64_t group = 1;
    if (const auto* c = op.any_cast<op::convolution>()) group = c->group;
    else if (const auto* d = op.any_cast<op::deconvolution>()) group = d->group;
    // oneDNN weights dims: [G,] OC/G, IC/G, kernel... The IR keeps [M, C/G, k...] for
    // convolution and [C, M/G, k...] for deconvolution; the same memory is described by
    // strides, so run-time weights need no copy.
    const auto G = static_cast<std::size_t>(std::max<std::int64_t>(group, 1));
    const std::size_t oc_g = transposed() ? wl[1] : wl[0] / G;
    const std::size_t ic_g = transposed() ? wl[0] / G : wl[1];
    const std::size_t oc_stride = transposed() ? ws[1] : ws[0];
    const std::size_t ic_stride = transposed() ? ws[0] : ws[1];
    std::vector<std::size_t> dims, strides;
    if (G > 1) {
        dims.push_back(G);
        strides.push_back(transposed() ? ic_g * ws[0] : oc_g * ws[0]);
    }
    dims.insert(dims.end(), {oc_g, ic_g});
    strides.insert(strides.end(), {oc_stride, ic_stride});
    for (std::size_t i = 2; i < r; ++i) {
        dims.push_back(wl[i]);
        strides.push_back(ws[i]);
    }
    const auto dt = to_dnnl_type(weights_shape.get_type());
    if (any) return dnnl::memory::desc(to_dims(dims), dt, dnnl::memory::format_tag::any);
    return dnnl::memory::desc(to_dims(dims), dt, to_dims(strides));
}

bool convolution::small_work(const std::vector<shape>& operands, const shape& out) const {
    if (dw.active() || transposed()) return false;
    const shape& w = weights_shape.lens().empty() && operands.size() > 1 ? operands[1] : weights_shape;
    const auto& lens = w.lens();
    if (lens.size() < 2 || lens[0] == 0) return false;
    const std::size_t per_output = w.elements() / lens[0];  // Cin / group x the window
    return out.elements() * per_output < single_thread_macs;
}

dnnl::primitive_desc_base convolution::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                               const shape& dst, bool any_weights) const {
    const shape& x = operands.at(0);
    const auto g = geometry_of(op, x, weights_shape);
    using md = dnnl::memory::desc;
    md wmd = weights_md(any_weights);
    md src = operand_md(0, x), out = out_md(dst);
    const auto bf16_type = dnnl::memory::data_type::bf16, f32 = dnnl::memory::data_type::f32;
    if (in_bf16(any_weights)) {
        wmd = retyped(wmd, bf16_type);
        src = retyped(src, bf16_type);
    } else {
        // Without native bf16, bf16 activations are converted in and out (bind_operands).
        if (x.get_type() == type::bfloat16) src = retyped(src, f32);
        if (bf16_result()) out = retyped(out, f32);
    }
    md bias = has_bias ? md_of(operands.at(2)) : md();
    auto attr = make_attr(post_ops, operands, dst.ndim(), layouts);
    if (dw.active()) {
        // The primitive is described by the 1x1 convolution (its own result dims); its
        // post-op chain is [1x1 post-ops, depthwise, depthwise post-ops].
        const shape mid = op.compute_shape(ir_operands(*this, operands));
        // The depthwise kernel's input layout: oneDNN's choice while planning; once planned
        // (and when a saved program loads on another CPU), the blocking of the planned
        // result, so the fused primitive writes that layout whichever kernels this CPU has.
        out = any_dst || dst_layout.empty() || pixel_channels(dst_layout) == 0
                  ? any_md(mid)
                  : pixel_channels_layout_like(dst_layout, mid.lens()).to_md();
        auto po = make_post_ops(post_ops, operands, dst.ndim(), layouts);
        const auto f32 = dnnl::memory::data_type::f32;
        po.append_dw(f32, dw.has_bias ? f32 : dnnl::memory::data_type::undef, f32, dw.kernel, dw.stride, dw.pad, 0,
                     {});
        for (const auto& p : dw.post_ops) po.append_eltwise(1.0f, eltwise_algorithm(p.algorithm), p.alpha, p.beta);
        attr.set_post_ops(po);
    }
    const auto prop = dnnl::prop_kind::forward_inference;
    // The preferred implementation when this CPU has it, else oneDNN's first choice.
    auto pick = [&](auto make) -> dnnl::primitive_desc_base {
        auto pd = make();
        if (impl.empty() || impl_name(pd) == impl) return pd;
        while (pd.next_impl())
            if (impl_name(pd) == impl) return pd;
        return make();
    };
    if (transposed()) {
        dnnl::deconvolution_forward::desc d =
            has_bias ? dnnl::deconvolution_forward::desc(prop, dnnl::algorithm::deconvolution_direct, src, wmd, bias,
                                                         out, g.strides, g.dilates, g.pad_l, g.pad_r)
                     : dnnl::deconvolution_forward::desc(prop, dnnl::algorithm::deconvolution_direct, src, wmd, out,
                                                         g.strides, g.dilates, g.pad_l, g.pad_r);
        return pick([&] { return dnnl::deconvolution_forward::primitive_desc(d, attr, eng); });
    }
    dnnl::convolution_forward::desc d =
        has_bias ? dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src, wmd, bias, out,
                                                   g.strides, g.dilates, g.pad_l, g.pad_r)
                 : dnnl::convolution_forward::desc(prop, dnnl::algorithm::convolution_direct, src, wmd, out, g.strides,
                                                   g.dilates, g.pad_l, g.pad_r);
    return pick([&] { return dnnl::convolution_forward::primitive_desc(d, attr, eng); });
}

void convolution::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                                const std::vector<shape>& operands, const std::vector<argument>& constants,
                                const dnnl::engine& eng) const {
    // The source as stored (float32, or bf16 from a convolution before) into the type the
    // kernel computes in, when they differ.
    const auto stored = operands.at(0).get_type() == type::bfloat16 ? dnnl::memory::data_type::bf16
                                                                     : dnnl::memory::data_type::f32;
    if (pd.src_desc().data_type() != stored)
        k.bind_converted(DNNL_ARG_SRC, 0, retyped(pd.src_desc(), stored), pd.src_desc(), eng);
    else k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    // A bf16 result computed in float32 (no native bf16 here): converted into dst_layout;
    // a sum post-op then first reads the bf16 residual into the kernel's float32 result.
    if (bf16_result() && pd.dst_desc().data_type() != dnnl::memory::data_type::bf16)
        k.convert_output({}, has_sum_post_op(post_ops));
    if (weights.empty()) k.bind(DNNL_ARG_WEIGHTS, 1, pd.weights_desc());
    else bind_constant_weights(k, weights, pd.weights_desc(), 1, constants, eng, name());
    if (has_bias) k.bind(DNNL_ARG_BIAS, 2, md_of(operands.at(2)));
    if (dw.active()) {
        const int dw_arg = DNNL_ARG_ATTR_POST_OP_DW;
        const std::size_t i = dw_operand();
        const auto wanted = pd.query_md(dnnl::query::exec_arg_md, dw_arg | DNNL_ARG_WEIGHTS);
        bind_constant_weights(k, dw.weights, wanted, i, constants, eng, name(), dw_arg | DNNL_ARG_WEIGHTS);
        if (dw.has_bias) k.bind(dw_arg | DNNL_ARG_BIAS, i + 1, md_of(operands.at(i + 1)));
    }
    bind_post_op_inputs(k, post_ops, operands, pd.dst_desc().dims().size(), layouts);
}

md_record plain_weights_record(const operation& conv) {
    return md_record::from(conv.get<convolution>().weights_md(false));
}

KILN_REGISTER_OP(convolution)

}  // namespace kiln::cpu
