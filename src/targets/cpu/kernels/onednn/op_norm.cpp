// cpu::pooling, cpu::softmax, cpu::layer_norm, cpu::batch_norm, cpu::lrn.
#include "targets/cpu/kernels/onednn/op_misc.hpp"

#include "ops/nn_pooling.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>

namespace kiln::cpu {

namespace {

constexpr auto inference = dnnl::prop_kind::forward_inference;

void expect_operands(const std::string& name, const std::vector<shape>& operands, std::size_t n) {
    if (operands.size() != n)
        throw_error(error_code::shape, name + ": expected " + std::to_string(n) + " operands, got " +
                                           std::to_string(operands.size()));
}

void expect_float(const std::string& name, const shape& x) {
    if (!dnnl_type_supported(x.get_type()))
        throw_error(error_code::type, name + ": element type " + std::string(type_name(x.get_type())) +
                                          " is not supported (float32)");
}

std::size_t checked_axis(const std::string& name, std::int64_t axis, std::size_t rank) {
    const auto r = static_cast<std::int64_t>(rank);
    if (axis < -r || axis >= r)
        throw_error(error_code::shape, name + ": axis " + std::to_string(axis) + " out of range for rank " +
                                           std::to_string(rank));
    return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

// Ops whose oneDNN form has one data descriptor write their output in x's layout.
void expect_same_layout(const std::string& name, const dnnl::memory::desc& x, const dnnl::memory::desc& dst) {
    if (x != dst) throw_error(error_code::unsupported, name + ": the output must have the layout of x");
}

}  // namespace

// ---- pooling ----

shape pooling::logical_shape(const std::vector<shape>& operands) const {
    expect_operands(name(), operands, 1);
    // 8-bit max pooling too: quantized CNNs' pools on their u8/s8 values (lower_pooling_8bit);
    // and bf16 max pooling between bf16 convolutions (bf16_activations.hpp).
    const type t = operands[0].get_type();
    const auto* p = op.any_cast<op::pooling>();
    if (!(p && p->mode == op::pooling_mode::max && (t == type::uint8 || t == type::int8 || t == type::bfloat16)))
        expect_float(name(), operands[0]);
    // A max pooling whose planned result is bf16 (bf16_activations.hpp) returns bf16 whatever
    // its source still is while that pass rewrites the program (its source turns bf16 too).
    const shape out = op.compute_shape(operands);
    if (p && p->mode == op::pooling_mode::max && !dst_layout.empty() &&
        dst_layout.to_md().data_type() == dnnl::memory::data_type::bf16)
        return out.with_type(type::bfloat16);
    return out;
}

dnnl::primitive_desc_base pooling::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                           const shape& dst) const {
    const auto* p = op.any_cast<op::pooling>();
    if (!p) throw_error(error_code::parse, name() + ": wraps '" + op.name() + "', expected pooling");
    const auto g = p->geom(operands.at(0));
    dnnl::algorithm alg = dnnl::algorithm::pooling_max;
    if (p->mode == op::pooling_mode::average)
        alg = p->count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                   : dnnl::algorithm::pooling_avg_exclude_padding;
    else if (p->mode != op::pooling_mode::max)
        throw_error(error_code::unsupported, name() + ": Lp pooling has no oneDNN form");
    dnnl::memory::dims strides, kernel, dilation, pad_l, pad_r;
    for (std::size_t i = 0; i < g.in.size(); ++i) {
        const std::int64_t span = (g.kernel[i] - 1) * g.dilation[i] + 1;
        // What makes the output its IR size; never below 0 (the floor rounding that
        // left the last input rows out keeps the same output size).
        const std::int64_t end = std::max<std::int64_t>((g.out[i] - 1) * g.stride[i] + span - g.in[i] - g.pad_begin[i], 0);
        // Averages that count padding divide by the window clipped to the padded
        // input (ONNX); oneDNN divides by the whole window, equal only where no window
        // runs past the padding (ceil_mode's extra end). Padding no window reaches
        // (MaxViT: 112 rows, 3x3 stride 2, pads 1: the last window ends at row 111) is
        // left out, as for the other algorithms.
        if (alg == dnnl::algorithm::pooling_avg_include_padding && end > g.pad_end[i])
            throw_error(error_code::unsupported, name() + ": ceil_mode with count_include_pad has no oneDNN form");
        strides.push_back(g.stride[i]);
        kernel.push_back(g.kernel[i]);
        dilation.push_back(g.dilation[i] - 1);
        pad_l.push_back(g.pad_begin[i]);
        pad_r.push_back(end);
    }
    auto make = [&](const dnnl::memory::desc& src, const dnnl::memory::desc& out) {
        dnnl::pooling_v2_forward::desc d(inference, alg, src, out, strides, kernel, dilation, pad_l, pad_r);
        return dnnl::pooling_v2_forward::primitive_desc(d, make_attr({}, operands, dst.ndim()), eng);
    };
    const auto src = operand_md(0, operands[0]), out = out_md(dst);
    const auto bf16 = dnnl::memory::data_type::bf16, f32 = dnnl::memory::data_type::f32;
    if (src.data_type() != bf16 && out.data_type() != bf16) return make(src, out);
    // A bf16 max pooling (bf16_activations.hpp) saved where the CPU had native bf16: oneDNN
    // 2.6 has no bf16 pooling for AVX2, so there it pools in float32 between conversions
    // (exact: bf16 values are float32 values).
    try {
        return make(src, out);
    } catch (const dnnl::error&) {
        return make(retyped(src, f32), retyped(out, f32));
    }
}

void pooling::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                            const std::vector<argument>&, const dnnl::engine& eng) const {
    const auto bf16 = dnnl::memory::data_type::bf16;
    if (operands.at(0).get_type() == type::bfloat16 && pd.src_desc().data_type() != bf16)
        k.bind_converted(DNNL_ARG_SRC, 0, retyped(pd.src_desc(), bf16), pd.src_desc(), eng);
    else k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    if (!dst_layout.empty() && dst_layout.to_md().data_type() == bf16 && pd.dst_desc().data_type() != bf16)
        k.convert_output({});
}

// ---- softmax ----

shape softmax::logical_shape(const std::vector<shape>& operands) const {
    expect_operands(name(), operands, 1);
    expect_float(name(), operands[0]);
    checked_axis(name(), axis, operands[0].ndim());
    return operands[0].as_standard();
}

dnnl::primitive_desc_base softmax::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                           const shape& dst) const {
    expect_plain();
    const auto ax = static_cast<int>(checked_axis(name(), axis, operands.at(0).ndim()));
    dnnl::softmax_v2_forward::desc d(inference, log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate,
                                     md_of(operands[0]), md_of(dst), ax);
    return dnnl::softmax_v2_forward::primitive_desc(d, make_attr({}, operands, dst.ndim()), eng);
}

void softmax::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>&,
                            const std::vector<argument>&, const dnnl::engine&) const {
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
}

// ---- layer_norm ----

namespace {
// x seen as (dims before axis..., C): the normalized dims must be row-major contiguous.
dnnl::memory::desc rows_md(const std::string& name, const shape& x, std::size_t axis) {
    const auto& l = x.lens();
    const auto& s = x.strides();
    std::size_t c = 1;
    for (std::size_t d = l.size(); d-- > axis;) {
        if (l[d] != 1 && s[d] != c)
            throw_error(error_code::unsupported, name + ": the normalized dims of " + x.to_string() +
                                                     " are not contiguous");
        c *= l[d];
    }
    std::vector<std::size_t> lens(l.begin(), l.begin() + static_cast<std::ptrdiff_t>(axis));
    std::vector<std::size_t> strides(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(axis));
    lens.push_back(c);
    strides.push_back(1);
    return md_of(shape(x.get_type(), lens, strides));
}

std::size_t normalized_size(const shape& x, std::size_t axis) {
    std::size_t c = 1;
    for (std::size_t d = axis; d < x.ndim(); ++d) c *= x.lens()[d];
    return c;
}

// A per-element parameter of the normalized dims, as a dense vector of C values.
dnnl::memory::desc vector_md(const std::string& name, const shape& p, std::size_t c, const char* what) {
    if (p.elements() != c || !p.packed() || p.get_type() != type::float32)
        throw_error(error_code::unsupported, name + ": " + what + " " + p.to_string() + " must hold " +
                                                 std::to_string(c) + " packed float32 values");
    return dnnl::memory::desc({static_cast<dnnl::memory::dim>(c)}, dnnl::memory::data_type::f32,
                              dnnl::memory::format_tag::a);
}
}  // namespace

shape layer_norm::logical_shape(const std::vector<shape>& operands) const {
    expect_operands(name(), operands, has_bias ? 3 : 2);
    expect_float(name(), operands[0]);
    checked_axis(name(), axis, operands[0].ndim());
    return operands[0].as_standard();
}

dnnl::primitive_desc_base layer_norm::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                              const shape& dst) const {
    expect_plain();
    const shape& x = operands.at(0);
    const auto ax = checked_axis(name(), axis, x.ndim());
    expect_same_layout(name(), operand_md(0, x), out_md(dst));
    if (!x.packed()) throw_error(error_code::unsupported, name() + ": x must be packed, got " + x.to_string());
    const auto c = normalized_size(x, ax);
    vector_md(name(), operands.at(1), c, "scale");
    if (has_bias) vector_md(name(), operands.at(2), c, "bias");
    auto flags = dnnl::normalization_flags::use_scale;
    if (has_bias) flags = flags | dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc d(inference, rows_md(name(), x, ax), epsilon, flags);
    return dnnl::layer_normalization_forward::primitive_desc(d, make_attr({}, operands, dst.ndim()), eng);
}

void layer_norm::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                               const std::vector<shape>& operands, const std::vector<argument>&,
                               const dnnl::engine&) const {
    const auto c = normalized_size(operands[0], checked_axis(name(), axis, operands[0].ndim()));
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    k.bind(DNNL_ARG_SCALE, 1, vector_md(name(), operands[1], c, "scale"));
    if (has_bias) k.bind(DNNL_ARG_SHIFT, 2, vector_md(name(), operands[2], c, "bias"));
}

// ---- batch_norm ----

shape batch_norm::logical_shape(const std::vector<shape>& operands) const {
    expect_operands(name(), operands, 5);
    expect_float(name(), operands[0]);
    if (operands[0].ndim() < 2) throw_error(error_code::shape, name() + ": x must have a channel dim");
    return operands[0].as_standard();
}

dnnl::primitive_desc_base batch_norm::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                              const shape& dst) const {
    const shape& x = operands.at(0);
    expect_same_layout(name(), operand_md(0, x), out_md(dst));
    for (std::size_t i = 1; i < 5; ++i) vector_md(name(), operands.at(i), x.lens()[1], "statistic");
    auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                 dnnl::normalization_flags::use_shift;
    dnnl::batch_normalization_forward::desc d(inference, operand_md(0, x), epsilon, flags);
    return dnnl::batch_normalization_forward::primitive_desc(d, make_attr({}, operands, dst.ndim()), eng);
}

void batch_norm::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                               const std::vector<shape>& operands, const std::vector<argument>&,
                               const dnnl::engine&) const {
    const auto c = operands[0].lens()[1];
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    const int args[] = {DNNL_ARG_SCALE, DNNL_ARG_SHIFT, DNNL_ARG_MEAN, DNNL_ARG_VARIANCE};
    for (std::size_t i = 0; i < 4; ++i) k.bind(args[i], i + 1, vector_md(name(), operands[i + 1], c, "statistic"));
}

// ---- lrn ----

shape lrn::logical_shape(const std::vector<shape>& operands) const {
    expect_operands(name(), operands, 1);
    expect_float(name(), operands[0]);
    return operands[0].as_standard();
}

dnnl::primitive_desc_base lrn::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                       const shape& dst) const {
    expect_same_layout(name(), operand_md(0, operands.at(0)), out_md(dst));
    // ONNX sums floor((size-1)/2) channels before and ceil((size-1)/2) after; oneDNN
    // centres the window, the same only for odd sizes.
    if (size < 1 || size % 2 == 0) throw_error(error_code::unsupported, name() + ": even sizes have no oneDNN form");
    dnnl::lrn_forward::desc d(inference, dnnl::algorithm::lrn_across_channels, operand_md(0, operands[0]), size, alpha,
                              beta,
                              bias);
    return dnnl::lrn_forward::primitive_desc(d, make_attr({}, operands, dst.ndim()), eng);
}

void lrn::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>&,
                        const std::vector<argument>&, const dnnl::engine&) const {
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
}

KILN_REGISTER_OP(pooling)
KILN_REGISTER_OP(softmax)
KILN_REGISTER_OP(layer_norm)
KILN_REGISTER_OP(batch_norm)
KILN_REGISTER_OP(lrn)

}  // namespace kiln::cpu
