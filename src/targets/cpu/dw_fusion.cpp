#include "targets/cpu/dw_fusion.hpp"

#include "ops/nn_conv.hpp"

namespace kiln::cpu {

namespace {

// The IR convolution `c` wraps, its geometry, when it is a 2-D convolution.
std::optional<op::conv_geometry> geometry(const convolution& c, const anchor_plan& p) {
    if (c.transposed() || p.shapes.empty()) return std::nullopt;
    const auto* ir = c.op.any_cast<op::convolution>();
    if (!ir) return std::nullopt;
    auto g = ir->conv_geom(ir->name(), p.shapes[0], c.weights_shape);
    if (g.rank() != 2 || g.batch < 1) return std::nullopt;
    for (auto d : g.dilation)
        if (d != 1) return std::nullopt;
    return g;
}

bool eltwise_only(const std::vector<post_op>& ops) {
    for (const auto& p : ops)
        if (p.kind != "eltwise") return false;
    return true;
}

// The instruction whose value the plan produces.
instruction_ref result_of(const anchor_plan& p) { return p.chain.members.empty() ? p.anchor : p.chain.members.back(); }

}  // namespace

std::optional<anchor_plan> fuse_depthwise(lower_env& env, const anchor_plan& a, const anchor_plan& b) {
    const auto* c1 = a.op.any_cast<convolution>();
    const auto* c2 = b.op.any_cast<convolution>();
    if (!c1 || !c2 || c1->dw.active() || c2->dw.active()) return std::nullopt;
    if (!a.constant_weights || !b.constant_weights || a.dw_weights_operand || b.dw_weights_operand) return std::nullopt;
    if (!a.chain.extra.empty() || !b.chain.extra.empty() || a.scaled_operand || b.scaled_operand) return std::nullopt;
    if (!eltwise_only(c1->post_ops) || !eltwise_only(c2->post_ops)) return std::nullopt;
    if (c1->layouts.empty() || c1->layouts[0].empty()) return std::nullopt;
    // b reads a's result, and only b does.
    const auto mid = result_of(a);
    if (b.anchor->inputs().empty() || b.anchor->inputs()[0] != mid || mid->outputs().size() != 1) return std::nullopt;
    for (auto in = b.anchor->inputs().begin() + 1; in != b.anchor->inputs().end(); ++in)
        if (*in == mid) return std::nullopt;
    auto g1 = geometry(*c1, a);
    auto g2 = geometry(*c2, b);
    if (!g1 || !g2) return std::nullopt;
    // a: 1x1, stride 1, no padding, not grouped.
    if (g1->group != 1 || g1->kernel != std::vector<std::int64_t>{1, 1} || g1->stride != std::vector<std::int64_t>{1, 1} ||
        g1->pad_begin != std::vector<std::int64_t>{0, 0} || g1->out != g1->in)
        return std::nullopt;
    // b: depthwise 3x3 over all of a's channels, stride 1 or 2, padding 1, output ceil(in / stride).
    const std::int64_t C = g1->out_channels;
    const std::int64_t s = g2->stride[0];
    if (g2->group != C || g2->in_channels != C || g2->out_channels != C || g2->kernel != std::vector<std::int64_t>{3, 3} ||
        g2->stride[1] != s || (s != 1 && s != 2) || g2->pad_begin != std::vector<std::int64_t>{1, 1})
        return std::nullopt;
    for (std::size_t d = 0; d < 2; ++d)
        if (g2->out[d] != (g2->in[d] + s - 1) / s) return std::nullopt;
    // b's operands: x, w[, bias] (its own, or a per-channel constant the chain turned into one).
    if (b.operands.size() != (c2->has_bias ? 3u : 2u) || !b.operands[1]->get_shape().standard()) return std::nullopt;

    convolution f = *c1;
    f.dw.kernel = 3;
    f.dw.stride = s;
    f.dw.pad = 1;
    f.dw.weights_shape = c2->weights_shape;
    f.dw.has_bias = c2->has_bias;
    f.dw.post_ops = c2->post_ops;
    anchor_plan p = a;
    const std::size_t base = p.operands.size();
    p.operands.push_back(b.operands[1]);
    p.shapes.push_back(b.shapes[1]);
    p.wanted.push_back(std::nullopt);
    p.dw_weights_operand = base;
    if (c2->has_bias) {
        p.operands.push_back(b.operands[2]);
        p.shapes.push_back(b.shapes[2]);
        p.wanted.push_back(std::nullopt);
        for (auto v : b.vector_operands)
            if (v == 2) p.vector_operands.push_back(base + 1);
    }
    p.dst = b.dst;
    f.any_dst = true;
    try {
        auto pd = f.make_pd(env.ctx.engine(), p.shapes, p.dst, true);
        // Only oneDNN's own fused jit kernel: its ref_fused fallback runs the two
        // convolutions separately and gains nothing.
        const std::string impl = impl_name(pd);
        if (impl.rfind("jit_1x1", 0) != 0) return std::nullopt;
        if (pd.src_desc() != c1->layouts[0].to_md() || !md_record::representable(pd.dst_desc())) return std::nullopt;
        f.dst_layout = md_record::from(pd.dst_desc());
    } catch (const dnnl::error&) {
        return std::nullopt;
    } catch (const error& e) {
        if (e.code() == error_code::unsupported) return std::nullopt;
        throw;
    }
    f.any_dst = false;
    p.op = f;
    p.chain.members.push_back(b.anchor);
    p.chain.members.insert(p.chain.members.end(), b.chain.members.begin(), b.chain.members.end());
    return p;
}

void relayout_dw_weights(lower_env& env, anchor_plan& p, convolution& op, instruction_ref pos) {
    const std::size_t i = *p.dw_weights_operand;
    auto pd = op.make_pd(env.ctx.engine(), p.shapes, p.dst, true);
    auto wanted = pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
    if (!md_record::representable(wanted))
        throw_error(error_code::unsupported, "cpu::convolution: the depthwise post-op weights layout cannot be stored");
    const auto& w = p.operands[i]->get_literal().get_argument();
    auto mem = reorder_constant(env.ctx.engine(), op.dw.plain_md(), w.data(), wanted);
    const std::size_t n = wanted.get_size() / sizeof(float);
    p.operands[i] = env.constant(pos, literal(shape(type::float32, {n}), mem.get_data_handle()));
    op.dw.weights = md_record::from(wanted);
}

}  // namespace kiln::cpu
