#include "targets/gpu/kernels/fused_kernel.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

namespace kiln::gpu {

shape fused_kernel::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.empty()) throw_error(error_code::shape, "gpu::fused_kernel: missing its output buffer");
    std::vector<shape> in(inputs.begin(), inputs.end() - 1);
    auto s = body.compute_shape(in);
    if (!s.same_lens_and_type(inputs.back()))
        throw_error(error_code::shape, "gpu::fused_kernel: result " + s.to_string() + " does not fit its buffer " +
                                           inputs.back().to_string());
    return inputs.back();
}

argument fused_kernel::compute(context&, const shape&, const std::vector<argument>&) const {
    throw_error(error_code::unsupported, "gpu::fused_kernel " + symbol +
                                             ": launching kernels on a device is not implemented yet (issue 21)");
}

KILN_REGISTER_OP(fused_kernel)

}  // namespace kiln::gpu
