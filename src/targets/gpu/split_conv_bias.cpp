#include "targets/gpu/split_conv_bias.hpp"

#include "ops/nn_conv.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/tensor_views.hpp"
#include "targets/gpu/kernels/cudnn_conv.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <vector>

namespace kiln::gpu {

void split_conv_bias::apply(module& m) const {
    if (!options) throw_error(error_code::runtime, name() + ": made without the gpu context's options");
    if (!options->cudnn) return;
    std::vector<instruction_ref> convs;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->get_operator().any_cast<op::convolution>() && ins->inputs().size() == 3) convs.push_back(ins);
    for (auto ins : convs) {
        const auto& y = ins->get_shape();
        if (!y.is_tensor() || y.dynamic()) continue;  // cuDNN takes static shapes only (cudnn_conv_takes)
        const auto bias = ins->inputs()[2];
        if (!bias->get_shape().is_tensor() || bias->get_shape().elements() != (y.ndim() > 1 ? y.lens()[1] : 0)) continue;
        auto conv = m.insert_instruction(ins, ins->get_operator(), {ins->inputs()[0], ins->inputs()[1]});
        if (!cudnn_conv_takes(conv)) {
            m.remove_instruction(conv);
            continue;
        }
        // [M] -> [M, 1, ...]: broadcast against [N, M, spatial...] from the right.
        op::reshape r;
        r.dims = {static_cast<std::int64_t>(y.lens()[1])};
        for (std::size_t d = 2; d < y.ndim(); ++d) r.dims.push_back(1);
        auto b = m.insert_instruction(ins, r, {bias});
        m.replace_instruction(ins, op::add_op{}, {conv, b});
    }
}

}  // namespace kiln::gpu
