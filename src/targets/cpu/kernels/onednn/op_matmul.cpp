#include "targets/cpu/kernels/onednn/op_matmul.hpp"

#include "ops/nn_matmul.hpp"

#include <kiln/register_op.hpp>

#include <utility>

namespace kiln::cpu {

namespace {

std::vector<std::size_t> swap_last_two(std::vector<std::size_t> v) {
    std::swap(v[v.size() - 1], v[v.size() - 2]);
    return v;
}

}  // namespace

dnnl::memory::desc matrix_md(const shape& s, std::size_t rank, bool transpose) {
    if (!transpose) return md_with_rank(s, rank);
    shape t(s.get_type(), swap_last_two(s.lens()), swap_last_two(s.strides()));
    return md_with_rank(t, rank);
}

shape matmul::logical_shape(const std::vector<shape>& operands) const {
    const std::size_t want = 2 + (has_bias ? 1 : 0);
    if (operands.size() < want)
        throw_error(error_code::shape, name() + ": expected a, b" + std::string(has_bias ? ", bias" : "") + ", got " +
                                           std::to_string(operands.size()) + " operands");
    const shape& a = operands[0];
    const shape& b = weights.empty() ? operands[1] : weights_shape;
    if (!weights.empty() && operands[1].get_type() != a.get_type())
        throw_error(error_code::type, name() + ": weights blob " + operands[1].to_string() + " for a " + a.to_string());
    if (a.ndim() < 2 || b.ndim() < 2)
        throw_error(error_code::shape, name() + ": operands must have rank >= 2, got " + a.to_string() + " and " +
                                           b.to_string());
    if (a.get_type() != b.get_type())
        throw_error(error_code::type, name() + ": operand types differ: " + a.to_string() + " and " + b.to_string());
    auto al = trans_a ? swap_last_two(a.lens()) : a.lens();
    auto bl = trans_b ? swap_last_two(b.lens()) : b.lens();
    return shape(a.get_type(), op::matmul_lens(name(), al, bl));
}

dnnl::memory::desc matmul::weights_md(std::size_t rank, bool constant) const {
    auto md = matrix_md(weights_shape, rank, trans_b);
    if (!constant) return md;
    // Constant weights are stored row-major (K x N) with each row padded by 16 floats.
    // oneDNN 2.6 leaves them plain for its gemm on AVX2 (format any), and a row stride
    // that is a multiple of 1 KiB makes that gemm thrash L1 sets while it packs B:
    // 128x256 by 256x1024 runs 2x slower than with the padded stride.
    auto dims = md.dims();
    const auto r = dims.size();
    dnnl::memory::dims strides(r);
    const auto ld = dims[r - 1] + 16;
    strides[r - 1] = 1;
    strides[r - 2] = ld;
    for (std::size_t d = r - 2; d-- > 0;) strides[d] = strides[d + 1] * dims[d + 1];
    return dnnl::memory::desc(dims, md.data_type(), strides);
}

dnnl::primitive_desc_base matmul::make_pd(const dnnl::engine& eng, const std::vector<shape>& operands,
                                          const shape& dst, bool any_weights) const {
    expect_plain();
    const std::size_t r = dst.ndim();
    const shape& b = weights.empty() ? operands.at(1) : weights_shape;
    auto src = matrix_md(operands.at(0), r, trans_a);
    auto wei = any_weights ? weights_md(r, true) : matrix_md(b, r, trans_b);
    auto out = md_of(dst);
    auto attr = make_attr(post_ops, operands, r);
    if (has_bias) {
        auto bias = md_with_rank(operands.at(2), r);
        return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, bias, out), attr, eng);
    }
    return dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, out), attr, eng);
}

void matmul::bind_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd, const std::vector<shape>& operands,
                           const std::vector<argument>& constants, const dnnl::engine& eng) const {
    k.bind(DNNL_ARG_SRC, 0, pd.src_desc());
    if (weights.empty()) k.bind(DNNL_ARG_WEIGHTS, 1, pd.weights_desc());
    else bind_constant_weights(k, weights, pd.weights_desc(), 1, constants, eng, name());
    const std::size_t r = pd.dst_desc().dims().size();
    if (has_bias) k.bind(DNNL_ARG_BIAS, 2, md_with_rank(operands.at(2), r));
    bind_post_op_inputs(k, post_ops, operands, r);
}

KILN_REGISTER_OP(matmul)

}  // namespace kiln::cpu
