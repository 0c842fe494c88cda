#include "targets/gpu/kernels/lt_matmul.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

namespace kiln::gpu {

shape lt_matmul::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() != 4) throw_error(error_code::shape, "gpu::lt_matmul: expects a, b, workspace and output");
    const auto& a = inputs[0].lens();
    const auto& b = inputs[1].lens();
    if (a.size() < 2 || b.size() < 2)
        throw_error(error_code::shape, "gpu::lt_matmul: operands of rank 2 or more, got " + inputs[0].to_string() +
                                           " and " + inputs[1].to_string());
    const auto k_a = trans_a ? a[a.size() - 2] : a.back();
    const auto k_b = trans_b ? b.back() : b[b.size() - 2];
    if (k_a != k_b)
        throw_error(error_code::shape, "gpu::lt_matmul: inner dims differ: " + inputs[0].to_string() + " and " +
                                           inputs[1].to_string());
    if (inputs[2].bytes() < lt_workspace_bytes)
        throw_error(error_code::shape, "gpu::lt_matmul: workspace " + inputs[2].to_string() + " is too small");
    return inputs[3];
}

argument lt_matmul::compute(context&, const shape&, const std::vector<argument>&) const {
    throw_error(error_code::unsupported, "gpu::lt_matmul: running cuBLASLt on a device is not implemented yet (issue 21)");
}

KILN_REGISTER_OP(lt_matmul)

}  // namespace kiln::gpu
