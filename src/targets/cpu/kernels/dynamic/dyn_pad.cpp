#include "targets/cpu/kernels/dynamic/dyn_pad.hpp"

#include "ops/tensor_common.hpp"
#include "ops/tensor_slice.hpp"
#include "targets/cpu/kernels/dynamic/memory_order.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cstring>
#include <numeric>

namespace kiln::cpu {

namespace {

struct pad_call {
    std::string mode;
    std::vector<std::int64_t> pads;  // {begin..., end...} over every axis
    const argument* value = nullptr;
};

pad_call read_call(const operation& o, const std::vector<argument>& args) {
    const auto rank = args[0].get_shape().ndim();
    if (const auto* p = o.any_cast<op::pad>())
        return {p->mode, op::expand_pads(p->pads, p->axes, rank, "cpu::dyn_pad"), args.size() > 1 ? &args[1] : nullptr};
    const auto& d = o.get<op::pad_dynamic>();
    std::vector<std::int64_t> axes;
    if (d.has_axes) axes = op::read_ints(args.back(), "cpu::dyn_pad", "axes");
    return {d.mode, op::expand_pads(op::read_ints(args[1], "cpu::dyn_pad", "pads"), axes, rank, "cpu::dyn_pad"),
            d.has_value ? &args[2] : nullptr};
}

}  // namespace

argument dyn_pad::compute(context& ctx, const shape& out, const std::vector<argument>& args) const {
    const auto call = read_call(op, args);
    const auto& xs = args[0].get_shape();
    const std::size_t rank = xs.ndim();
    if (std::all_of(call.pads.begin(), call.pads.end(), [](std::int64_t v) { return v == 0; }))
        return args[0];  // the identity: no copy
    const auto order = xs.is_tensor() ? memory_order(xs) : std::vector<std::size_t>{};
    const bool fits = call.mode == "constant" && xs.get_type() == type::float32 && rank > 0 && !order.empty() &&
                      std::all_of(call.pads.begin(), call.pads.end(), [](std::int64_t v) { return v >= 0; });
    if (!fits) return op.compute(ctx, out, args);
    std::vector<std::size_t> lens(rank);
    for (std::size_t d = 0; d < rank; ++d)
        lens[d] = xs.lens()[d] + static_cast<std::size_t>(call.pads[d] + call.pads[rank + d]);
    // The result in the input's order.
    const auto strides = strides_in(lens, order);
    const shape result(type::float32, lens, strides);
    auto y = argument::for_overwrite(result);
    float* dst = y.data_as<float>();
    const std::size_t step = result.elements();
    const float fill = call.value ? static_cast<float>(call.value->get_double(0)) : 0.0f;
    std::fill(dst, dst + step, fill);
    if (xs.elements() == 0) return y;
    // One row per index of every dim but the innermost stored one.
    const std::size_t inner = order.back(), row = xs.lens()[inner];
    const std::size_t rows = xs.elements() / row;
    const float* src = args[0].data_as<const float>();
    const auto n_rows = static_cast<std::int64_t>(rows);
#pragma omp parallel for schedule(static) if (step > (std::size_t{1} << 16))
    for (std::int64_t r = 0; r < n_rows; ++r) {
        std::size_t rest = static_cast<std::size_t>(r), from = 0, to = static_cast<std::size_t>(call.pads[inner]) * strides[inner];
        for (std::size_t i = rank - 1; i-- > 0;) {  // the stored order, innermost first
            const std::size_t d = order[i], idx = rest % xs.lens()[d];
            rest /= xs.lens()[d];
            from += idx * xs.strides()[d];
            to += (idx + static_cast<std::size_t>(call.pads[d])) * strides[d];
        }
        std::memcpy(dst + to, src + from, row * sizeof(float));
    }
    return y;
}

bool lower_dyn_pad(lower_env& env, instruction_ref ins) {
    if (!ins->get_operator().any_cast<op::pad>() && !ins->get_operator().any_cast<op::pad_dynamic>()) return false;
    return wrap_dynamic<dyn_pad>(env, ins);
}

KILN_REGISTER_OP(dyn_pad)

}  // namespace kiln::cpu
