#include "targets/cpu/kernels/onednn/quant_real.hpp"

#include <kiln/errors.hpp>

#include <cstring>

namespace kiln::cpu::quant_real {

dnnl::primitive_attr input_attr(float scale, std::int64_t zero_point) {
    dnnl::primitive_attr attr;
    if (scale != 1.0f) attr.set_output_scales(0, {scale});
    if (zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {static_cast<std::int32_t>(zero_point)});
    return attr;
}

dnnl::primitive_attr primitive_attr(const op::requantize_params& p, bool residual, const std::vector<float>& float_clamp) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::post_ops po;
    bool any_post_op = false;
    if (residual) {  // the result memory holds the residual's real values (read back first)
        po.append_sum(1.0f);
        any_post_op = true;
    }
    const std::int64_t lo = p.out_type == type::int8 ? -128 : 0, hi = p.out_type == type::int8 ? 127 : 255;
    if (p.quantized_output() && (p.y_min > lo || p.y_max < hi)) {
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, static_cast<float>(p.y_min - p.y_zero_point) * p.y_scale,
                          static_cast<float>(p.y_max - p.y_zero_point) * p.y_scale);
        any_post_op = true;
    }
    if (!p.quantized_output() && float_clamp.size() == 2) {
        po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, float_clamp[0], float_clamp[1]);
        any_post_op = true;
    }
    if (any_post_op) attr.set_post_ops(po);
    return attr;
}

dnnl::primitive_attr output_attr(const op::requantize_params& p) {
    dnnl::primitive_attr attr;
    if (!p.quantized_output()) return attr;
    attr.set_output_scales(0, {1.0f / p.y_scale});
    if (p.y_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {static_cast<std::int32_t>(p.y_zero_point)});
    return attr;
}

const argument& constant(const std::vector<argument>& constants, std::size_t i, const std::string& op_name) {
    if (constants.size() <= i || constants[i].empty())
        throw_error(error_code::runtime, op_name + ": needs constant input " + std::to_string(i) +
                                             " to compute in float on a CPU without VNNI");
    return constants[i];
}

std::vector<float> weights(const argument& w, const op::requantize_params& p, std::size_t inner,
                           std::size_t channels, const std::string& op_name) {
    const shape& s = w.get_shape();
    if (!s.standard() || (s.get_type() != type::int8 && s.get_type() != type::uint8))
        throw_error(error_code::runtime, op_name + ": expected row-major 8-bit weights, got " + s.to_string());
    const std::size_t n = s.elements();
    std::vector<float> out(n);
    const auto zero = static_cast<float>(p.w_zero_point);
    for (std::size_t i = 0; i < n; ++i) {
        const float q = s.get_type() == type::int8 ? static_cast<float>(w.data_as<std::int8_t>()[i])
                                                   : static_cast<float>(w.data_as<std::uint8_t>()[i]);
        const float scale = p.w_scales[p.w_scales.size() == 1 ? 0 : (i / inner) % channels];
        out[i] = (q - zero) * scale;  // as DequantizeLinear computes it, in float
    }
    return out;
}

dnnl::memory bias(const argument& b, const op::requantize_params& p, std::size_t channels,
                  const dnnl::memory::desc& md, const dnnl::engine& eng, const std::string& op_name) {
    const shape& s = b.get_shape();
    if (!s.standard() || s.elements() != channels || (s.get_type() != type::int32 && s.get_type() != type::float32))
        throw_error(error_code::runtime, op_name + ": expected " + std::to_string(channels) +
                                             " int32 or float32 bias values, got " + s.to_string());
    dnnl::memory m(md, eng);
    if (md.get_size() != channels * sizeof(float))
        throw_error(error_code::runtime, op_name + ": the bias layout is not " + std::to_string(channels) + " floats");
    auto* out = static_cast<float*>(m.get_data_handle());
    for (std::size_t c = 0; c < channels; ++c) {
        const float v = s.get_type() == type::int32 ? static_cast<float>(b.data_as<std::int32_t>()[c])
                                                    : b.data_as<float>()[c];
        out[c] = v * p.channel_scale(c);
    }
    return m;
}

}  // namespace kiln::cpu::quant_real
