// The int8 kernels' float form (cpu::quant_conv / quant_matmul on a CPU whose oneDNN has no
// VNNI int8 dot product): a program compiled on a VNNI CPU and loaded on one without must
// still run, and oneDNN's int8 kernels would saturate there (has_int8_dot_product). The
// kernel then converts the 8-bit activation to real values on the way in ((q - zero point)
// * scale, a reorder), runs oneDNN's float32 convolution or matmul on weights and bias
// made real once at load, clips in real units, and requantizes on the way out (a reorder
// rounding half to even and saturating). Results can differ from the int8 kernels' by a
// level where the float sum falls within an ulp of a half.
#pragma once
#include "ops/quant_fused.hpp"

#include <kiln/argument.hpp>

#include <dnnl.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu::quant_real {

// Attributes of a reorder from levels to real values: (q - zero_point) * scale.
dnnl::primitive_attr input_attr(float scale, std::int64_t zero_point);
// The float primitive's attributes: a user scratchpad, with `residual` a sum post-op (the
// kernel reads the residual's real values into its result first: convert_output's read-back)
// and, for an 8-bit result whose saturation range is narrowed (a folded Relu/Clip), that
// range as a clip in real units; for a float result, `float_clamp` ([lo, hi], a Relu/Clip
// folded by the lowering) as a clip.
dnnl::primitive_attr primitive_attr(const op::requantize_params& p, bool residual = false,
                                    const std::vector<float>& float_clamp = {});
// Attributes of the reorder from the real result to the output: y / y_scale + y_zero_point
// for an 8-bit result, nothing for a float one.
dnnl::primitive_attr output_attr(const op::requantize_params& p);
// The real weights (w - w_zero_point) * w_scale[channel], channel(i) = (i / inner) %
// channels of the row-major constant w.
std::vector<float> weights(const argument& w, const op::requantize_params& p, std::size_t inner,
                           std::size_t channels, const std::string& op_name);
// The real bias of `channels` values: the bias in accumulator units (int32 or float32) times
// x_scale * w_scale[channel], as memory of layout md.
dnnl::memory bias(const argument& b, const op::requantize_params& p, std::size_t channels,
                  const dnnl::memory::desc& md, const dnnl::engine& eng, const std::string& op_name);
// Constant input i of the instruction (weights, bias), or an error naming the op.
const argument& constant(const std::vector<argument>& constants, std::size_t i, const std::string& op_name);

}  // namespace kiln::cpu::quant_real
