#include "targets/cpu/kernels/int8_depthwise/int8_depthwise.hpp"

#include "targets/cpu/kernels/int8_gemm/int8_gemm.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"

#include "ops/quant_fused.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>

namespace kiln::cpu {

namespace {

// [n, c, h, w] lens of a channels-last 4-D tensor of 8-bit or float values.
bool channels_last_4d(const shape& s) {
    if (!s.is_tensor() || s.dynamic() || s.ndim() != 4 || !s.packed()) return false;
    const auto want = channels_last_strides(s.lens());
    for (std::size_t d = 0; d < 4; ++d)  // strides of dims of length 1 never matter
        if (s.lens()[d] != 1 && s.strides()[d] != want[d]) return false;
    return true;
}

}  // namespace

shape int8_depthwise::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 6) bad("expected x, weights, comp, scales, double params and an output buffer");
    const shape& x = inputs[0];
    const shape& y = inputs.back();
    if (!channels_last_4d(x) || (x.get_type() != type::uint8 && x.get_type() != type::int8))
        bad("x " + x.to_string() + " is not a channels-last 8-bit activation");
    if (!channels_last_4d(y) || y.get_type() != out_type || y.lens()[0] != x.lens()[0] || y.lens()[1] != x.lens()[1])
        bad("the output buffer " + y.to_string() + " does not fit x " + x.to_string());
    if (stride.size() != 2 || pad.size() != 2 || stride[0] < 1 || stride[1] < 1 || pad[0] < 0 || pad[1] < 0)
        bad("needs two strides and paddings");
    const std::size_t cp = i8g::padded(x.lens()[1]);
    if (inputs[1].elements() < i8g::dw_pairs * cp * 2 || inputs[2].elements() < cp || inputs[3].elements() < 2 * cp ||
        inputs[4].elements() < 3 * cp)
        bad("the packed weights or requantize constants are too small");
    for (std::size_t d = 0; d < 2; ++d) {
        const auto last = static_cast<std::int64_t>(y.lens()[2 + d] - 1) * stride[d] - pad[d];
        if (last + 2 < 0 || -pad[d] > 2) bad("the windows miss the image");
    }
    return y;
}

void int8_depthwise::finalize(context& ctx, const shape&, const std::vector<shape>&) {
    kernel = int8_depthwise_kernel(as_cpu_context(ctx, name()).options().packed_gemm_isa);
}

std::string int8_depthwise::isa() const {
    if (!kernel) return {};
    return kernel == i8g::avx2_depthwise() ? "avx2" : "generic";
}

argument int8_depthwise::compute(context&, const shape&, const std::vector<argument>& args) const {
    if (!kernel) throw_error(error_code::runtime, name() + ": run before it was finalized");
    const auto& x = args[0].get_shape().lens();
    const auto& y = args.back().get_shape().lens();
    i8g::dw_args d;
    d.batch = x[0];
    d.c = x[1];
    d.h = x[2];
    d.w = x[3];
    d.oh = y[2];
    d.ow = y[3];
    d.stride_h = static_cast<std::size_t>(stride[0]);
    d.stride_w = static_cast<std::size_t>(stride[1]);
    d.pad_h = static_cast<std::size_t>(pad[0]);
    d.pad_w = static_cast<std::size_t>(pad[1]);
    d.x = args[0].data();
    d.x_signed = args[0].get_shape().get_type() == type::int8;
    d.x_zero = static_cast<std::int32_t>(x_zero_point);
    d.wt = reinterpret_cast<const std::int16_t*>(args[1].data());
    d.y = args.back().data();
    d.q = int8_requant_view(reinterpret_cast<const std::int32_t*>(args[2].data()),
                            reinterpret_cast<const float*>(args[3].data()),
                            reinterpret_cast<const double*>(args[4].data()), d.c, f32_exact, out_type, y_scale,
                            y_zero_point, y_min, y_max);
    const std::size_t rows = d.batch * d.oh;
    const std::size_t work = rows * d.ow * d.c * 9;
    const int threads = work < single_thread_macs ? 1 : std::max(omp_get_max_threads(), 1);
    if (threads == 1) {
        kernel(d, 0, rows);
        return args.back();
    }
    const std::size_t per = (rows + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int t = 0; t < threads; ++t) {
        const std::size_t r0 = std::min(rows, static_cast<std::size_t>(t) * per), r1 = std::min(rows, r0 + per);
        if (r0 < r1) kernel(d, r0, r1);
    }
    return args.back();
}

bool int8_depthwise_takes(module&, instruction_ref ins, const cpu_options& o) {
    return own_int8_kernels(o) && int8_depthwise_fits(ins);
}

bool int8_depthwise_fits(instruction_ref ins) {
    const auto* q = ins->get_operator().any_cast<op::quant_convolution>();
    if (!q || q->has_residual || ins->inputs().size() < 2) return false;
    auto xi = ins->inputs()[0], wi = ins->inputs()[1];
    const auto& x = xi->get_shape();
    const auto& w = wi->get_shape();
    const auto& y = ins->get_shape();
    if (!x.is_tensor() || x.dynamic() || !y.is_tensor() || y.dynamic() || x.ndim() != 4 || w.ndim() != 4 ||
        x.elements() == 0 || y.elements() == 0)
        return false;
    if (x.get_type() != type::uint8 && x.get_type() != type::int8) return false;
    if (!wi->is_literal() || w.get_type() != type::int8 || q->w_zero_point != 0) return false;
    if (q->has_bias) {
        auto b = ins->inputs()[2];
        if (!b->is_literal() || (b->get_shape().get_type() != type::int32 && b->get_shape().get_type() != type::float32))
            return false;
    }
    const auto c = static_cast<std::int64_t>(x.lens()[1]);
    if (q->group != c || static_cast<std::int64_t>(w.lens()[0]) != c || w.lens()[1] != 1 || w.lens()[2] != 3 ||
        w.lens()[3] != 3)
        return false;
    auto g = q->conv_geom(q->name(), x, w);
    for (std::size_t d = 0; d < 2; ++d)
        if (g.dilation[d] != 1 || g.pad_begin[d] < 0 || g.pad_begin[d] > 2 || g.stride[d] < 1) return false;
    return true;
}

bool lower_int8_depthwise(lower_env& env, instruction_ref ins) {
    if (!int8_depthwise_takes(env.m, ins, env.ctx.options())) return false;
    return lower_int8_depthwise_anywhere(env, ins);
}

bool lower_int8_depthwise_anywhere(lower_env& env, instruction_ref ins) {
    if (!int8_depthwise_fits(ins)) return false;
    const auto q = *ins->get_operator().any_cast<op::quant_convolution>();
    auto xin = ins->inputs()[0];
    const auto& xs = xin->get_shape();
    const auto& lens = ins->get_shape().lens();
    const std::size_t c = xs.lens()[1], cp = i8g::padded(c);
    auto g = q.conv_geom(q.name(), xs, ins->inputs()[1]->get_shape());
    auto x = int8_relayout(env, ins, xin, shape(xs.get_type(), xs.lens(), channels_last_strides(xs.lens())));
    const auto wl = ins->inputs()[1]->get_literal();
    const auto* w = wl.get_argument().data_as<std::int8_t>();
    std::vector<std::int16_t> wt(i8g::dw_pairs * cp * 2, 0);
    std::vector<std::int64_t> abs_sum(c, 0), zero(c, 0);
    for (std::size_t ch = 0; ch < c; ++ch)
        for (std::size_t t = 0; t < 9; ++t) {
            const std::int16_t v = w[ch * 9 + t];
            wt[i8g::dw_weight_index(t, ch, cp)] = v;
            abs_sum[ch] += v < 0 ? -v : v;
        }
    std::vector<double> bias;
    bool int_bias = false;
    if (q.has_bias) {
        auto b = ins->inputs()[2];
        int_bias = b->get_shape().get_type() == type::int32;
        bias = rewrite::values_of(b->get_literal());
    }
    // The kernel subtracts the zero point itself (padding must add nothing): no compensation.
    const auto rq = pack_int8_requant(q, c, abs_sum, zero, bias, int_bias);
    int8_depthwise op;
    op.x_zero_point = q.x_zero_point;
    op.stride = {g.stride[0], g.stride[1]};
    op.pad = {g.pad_begin[0], g.pad_begin[1]};
    op.out_type = q.out_type;
    op.y_scale = q.y_scale;
    op.y_zero_point = q.y_zero_point;
    op.y_min = q.y_min;
    op.y_max = q.y_max;
    op.f32_exact = rq.f32_exact;
    emit_int8_kernel(env, ins, op, x, wt, rq, shape(q.out_type, lens, channels_last_strides(lens)));
    return true;
}

KILN_REGISTER_OP(int8_depthwise)

}  // namespace kiln::cpu
