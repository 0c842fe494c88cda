// cpu::reduction, cpu::concat, cpu::resampling, cpu::eltwise, cpu::binary, cpu::reorder.
#include "targets/cpu/kernels/onednn/op_misc.hpp"

#include "ops/common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>

namespace kiln::cpu {

namespace {

constexpr auto inference = dnnl::prop_kind::forward_inference;

void expect_float(const std::string& name, const std::vector<shape>& operands) {
    for (const auto& x : operands)
        if (!dnnl_type_supported(x.get_type()))
            throw_error(error_code::type, name + ": element type " + std::string(type_name(x.get_type())) +
                                              " is not supported (float32)");
}

void expect_count(const std::string& name, const std::vector<shape>& operands, std::size_t n) {
    if (operands.size() < n)
        throw_error(error_code::shape, name + ": expected " + std::to_string(n) + " operands, got " +
                                           std::to_string(operands.size()));
}

std::size_t binary_inputs(const std::vector<post_op>& ops) {
    return static_cast<std::size_t>(
        std::count_if(ops.begin(), ops.end(), [](const post_op& p) { return p.kind == "binary"; }));
}

}  // namespace

// ---- reduction ----

namespace {
std::vector<std::size_t> kept_lens(const std::string& name, const shape& x, const std::vector<std::int64_t>& axes) {
    auto l = x.lens();
    for (auto a : axes) {
        if (a < 0 || static_cast<std::size_t>(a) >= l.size())
            throw_error(error_code::shape, name + ": axis " + std::to_string(a) + " out of range for " + x.to_string());
        l[static_cast<std::size_t>(a)] = 1;
    }
    return l;
}
}  // namespace

shape reduction::logical_shape(const std::vector<shape>& operands) const {
    expect_count(name(), operands, 1);
    expect_float(name(), operands);
    auto kept = kept_lens(name(), operands[0], axes);
    std::vector<std::size_t> nonunit_kept, nonunit_out;
    for (auto d : kept)
        if (d != 1) nonunit_kept.push_back(d);
    for (auto d : out_lens)
        if (d != 1) nonunit_out.push_back(d);
    if (nonunit_kept != nonunit_out)
        throw_error(error_code::shape, name() + ": result lens do not match reducing " + operands[0].to_string());
    return shape(operands[0].get_type(), out_lens);
}

dnnl::primitive_desc_base reduction::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                             const shape& dst) const {
    static const std::vector<std::pair<std::string, dnnl::algorithm>> algs{
        {"sum", dnnl::algorithm::reduction_sum},
        {"mean", dnnl::algorithm::reduction_mean},
        {"max", dnnl::algorithm::reduction_max},
        {"min", dnnl::algorithm::reduction_min},
        {"mul", dnnl::algorithm::reduction_mul},
        {"norm_lp_sum", dnnl::algorithm::reduction_norm_lp_sum},
        {"norm_lp_power_p_sum", dnnl::algorithm::reduction_norm_lp_power_p_sum}};
    expect_plain();
    auto it = std::find_if(algs.begin(), algs.end(), [&](auto& a) { return a.first == algorithm; });
    if (it == algs.end()) throw_error(error_code::parse, name() + ": unknown algorithm '" + algorithm + "'");
    if (!dst.standard()) throw_error(error_code::unsupported, name() + ": the output buffer must be row-major");
    // The result with the reduced dims kept (length 1): the same memory as the buffer.
    shape kept(dst.get_type(), kept_lens(name(), operands.at(0), axes));
    dnnl::reduction::desc d(it->second, md_of(operands[0]), md_of(kept), p, 0.0f);
    return dnnl::reduction::primitive_desc(d, make_attr({}, operands, kept.ndim()), eng);
}

void reduction::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>&,
                              const std::vector<argument>&, const dnnl::engine&) const {
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
}

// ---- concat ----

shape concat::logical_shape(const std::vector<shape>& operands) const {
    expect_count(name(), operands, 1);
    expect_float(name(), operands);
    auto lens = operands[0].lens();
    if (axis < 0 || static_cast<std::size_t>(axis) >= lens.size())
        throw_error(error_code::shape, name() + ": axis " + std::to_string(axis) + " out of range");
    const auto ax = static_cast<std::size_t>(axis);
    for (std::size_t i = 1; i < operands.size(); ++i) {
        auto l = operands[i].lens();
        if (l.size() != lens.size() || operands[i].get_type() != operands[0].get_type())
            throw_error(error_code::shape, name() + ": operand " + operands[i].to_string() + " does not match " +
                                               operands[0].to_string());
        for (std::size_t d = 0; d < l.size(); ++d)
            if (d != ax && l[d] != lens[d])
                throw_error(error_code::shape, name() + ": operand " + operands[i].to_string() +
                                                   " differs from " + operands[0].to_string() + " off the axis");
        lens[ax] += l[ax];
    }
    return shape(operands[0].get_type(), lens);
}

dnnl::primitive_desc_base concat::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                          const shape& dst) const {
    std::vector<dnnl::memory::desc> srcs;
    for (std::size_t i = 0; i < operands.size(); ++i) srcs.push_back(operand_md(i, operands[i]));
    return dnnl::concat::primitive_desc(out_md(dst), static_cast<int>(axis), srcs, eng,
                                        make_attr({}, operands, dst.ndim()));
}

void concat::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base&, const std::vector<shape>& operands,
                           const std::vector<argument>&, const dnnl::engine&) const {
    for (std::size_t i = 0; i < operands.size(); ++i)
        k.bind(DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), i, operand_md(i, operands[i]));
}

// ---- resampling ----

shape resampling::logical_shape(const std::vector<shape>& operands) const {
    expect_count(name(), operands, 1);
    expect_float(name(), operands);
    if (operands[0].ndim() < 3 || out_lens.size() != operands[0].ndim() || out_lens[0] != operands[0].lens()[0] ||
        out_lens[1] != operands[0].lens()[1])
        throw_error(error_code::shape, name() + ": resamples only the spatial dims of " + operands[0].to_string());
    return shape(operands[0].get_type(), out_lens);
}

dnnl::primitive_desc_base resampling::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                              const shape& dst) const {
    dnnl::algorithm alg;
    if (algorithm == "nearest") alg = dnnl::algorithm::resampling_nearest;
    else if (algorithm == "linear") alg = dnnl::algorithm::resampling_linear;
    else throw_error(error_code::parse, name() + ": unknown algorithm '" + algorithm + "'");
    dnnl::resampling_forward::desc d(inference, alg, operand_md(0, operands.at(0)), out_md(dst));
    return dnnl::resampling_forward::primitive_desc(d, make_attr({}, operands, dst.ndim()), eng);
}

void resampling::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>&,
                               const std::vector<argument>&, const dnnl::engine&) const {
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
}

// ---- eltwise ----

shape eltwise::logical_shape(const std::vector<shape>& operands) const {
    expect_count(name(), operands, 1 + binary_inputs(ops));
    expect_float(name(), {operands[0]});
    if (ops.empty() || ops[0].kind != "eltwise")
        throw_error(error_code::shape, name() + ": needs an eltwise algorithm first");
    return operands[0].as_standard();
}

dnnl::primitive_desc_base eltwise::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                           const shape& dst) const {
    auto x = operand_md(0, operands.at(0));
    if (x != out_md(dst) || (layouts.empty() && !operands[0].packed()))
        throw_error(error_code::unsupported, name() + ": the output must have the packed layout of x " +
                                                 operands[0].to_string());
    // oneDNN 2.6's eltwise kernels apply post-ops wrongly to 1-D tensors (every element
    // comes out wrong); a [1, n] view of the same packed bytes computes them right.
    if (x.dims().size() == 1) x = x.reshape({1, x.dims()[0]});
    dnnl::eltwise_forward::desc d(inference, eltwise_algorithm(ops[0].algorithm), x, ops[0].alpha, ops[0].beta);
    std::vector<post_op> rest(ops.begin() + 1, ops.end());
    return dnnl::eltwise_forward::primitive_desc(d, make_attr(rest, operands, post_op_rank(operands), layouts), eng);
}

std::size_t eltwise::post_op_rank(const std::vector<shape>& operands) const {
    return std::max<std::size_t>(operands.at(0).ndim(), 2);
}

void eltwise::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                            const std::vector<shape>& operands, const std::vector<argument>&,
                            const dnnl::engine&) const {
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    bind_post_op_inputs(k, std::vector<post_op>(ops.begin() + 1, ops.end()), operands, post_op_rank(operands),
                        layouts);
}

// ---- binary ----

shape binary::logical_shape(const std::vector<shape>& operands) const {
    expect_count(name(), operands, 2 + binary_inputs(post_ops));
    expect_float(name(), {operands[0], operands[1]});
    auto out = op::broadcast_lens({operands[0].lens(), operands[1].lens()}, name());
    if (out != operands[0].lens())
        throw_error(error_code::shape, name() + ": a " + operands[0].to_string() + " must have the result's lens");
    return operands[0].as_standard();
}

dnnl::primitive_desc_base binary::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                          const shape& dst) const {
    const std::size_t r = dst.ndim();
    auto src1 = layouts.size() > 1 && !layouts[1].empty() ? layouts[1].to_md() : md_with_rank(operands.at(1), r);
    dnnl::binary::desc d(binary_algorithm(algorithm), operand_md(0, operands.at(0)), src1, out_md(dst));
    return dnnl::binary::primitive_desc(d, make_attr(post_ops, operands, r, layouts), eng);
}

void binary::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                           const std::vector<shape>& operands, const std::vector<argument>&,
                           const dnnl::engine&) const {
    k.bind(DNNL_ARG_SRC_0, 0, pd.src_desc(0));
    k.bind(DNNL_ARG_SRC_1, 1, pd.src_desc(1));
    bind_post_op_inputs(k, post_ops, operands, operands[0].ndim(), layouts);
}

// ---- reorder ----

namespace {
// The window of the operand a reorder reads (checked to lie inside its memory).
shape reorder_source(const std::string& name, const std::optional<shape>& view, std::size_t offset, const shape& x) {
    if (!view) return x;
    if (view->get_type() != x.get_type() || view->dynamic() ||
        (view->elements() > 0 && offset + view->element_space() > x.element_space()))
        throw_error(error_code::shape, name + ": view " + view->to_string() + " at offset " + std::to_string(offset) +
                                           " does not lie inside " + x.to_string());
    return *view;
}
}  // namespace

shape reorder::logical_shape(const std::vector<shape>& operands) const {
    expect_count(name(), operands, 1);
    // A bf16 activation into float32 in the same blocking (bf16_activations.hpp).
    const bool widening = operands[0].get_type() == type::bfloat16 && !dst_layout.empty() &&
                          dst_layout.data_type == dnnl_f32 && !view && out_lens.empty();
    if (widening) return operands[0].as_standard().with_type(type::float32);
    expect_float(name(), operands);
    auto src = reorder_source(name(), view, offset, operands[0]);
    if (out_lens.empty()) return src.as_standard();
    shape out(src.get_type(), out_lens);
    if (out.elements() != src.elements())
        throw_error(error_code::shape, name() + ": cannot copy " + src.to_string() + " into lens " + out.to_string());
    return out;
}

namespace {
dnnl::memory::desc source_md(const std::optional<shape>& view, std::size_t offset, const dnnl::memory::desc& x) {
    if (!view) return x;
    auto md = md_of(*view);
    md.data.offset0 = static_cast<dnnl_dim_t>(offset);
    return md;
}
}  // namespace

dnnl::primitive_desc_base reorder::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                           const shape& dst) const {
    auto src = reorder_source(name(), view, offset, operands.at(0));
    // Into a row-major buffer of other lens: the same bytes as row-major with the
    // source's lens.
    auto out = out_lens.empty() ? out_md(dst) : md_of(src.as_standard());
    if (!out_lens.empty() && (!dst.standard() || !dst_layout.empty()))
        throw_error(error_code::shape, name() + ": output buffer " + dst.to_string() + " must be row-major");
    if (view && !layouts.empty() && !layouts[0].empty())
        throw_error(error_code::shape, name() + ": a view of a tensor in a oneDNN layout");
    return dnnl::reorder::primitive_desc(eng, source_md(view, offset, operand_md(0, operands[0])), eng, out,
                                         make_attr({}, operands, dst.ndim()));
}

void reorder::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base&, const std::vector<shape>& operands,
                            const std::vector<argument>&, const dnnl::engine&) const {
    k.bind(DNNL_ARG_FROM, 0, source_md(view, offset, operand_md(0, operands[0])));
}

KILN_REGISTER_OP(reduction)
KILN_REGISTER_OP(concat)
KILN_REGISTER_OP(resampling)
KILN_REGISTER_OP(eltwise)
KILN_REGISTER_OP(binary)
KILN_REGISTER_OP(reorder)

}  // namespace kiln::cpu
