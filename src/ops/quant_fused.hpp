// Integer convolution and matrix product with a fused requantize: what the fuse_qdq pass
// makes of DequantizeLinear -> Conv / MatMul / Gemm [-> Relu / Clip] [-> QuantizeLinear]
// groups (src/passes/fuse_qdq.cpp).
//
//   acc[c] = sum (x - x_zero_point) * (w - w_zero_point)           exact, int64
//            (+ bias[c] when the bias is int32: it is in acc's units)
//   v[c]   = acc[c] * float(x_scale * w_scales[c])                 (+ bias[c] when float32)
//            (in double, then rounded once to float32: f = float(v))
//   f     += (float(r) - float(r_zero_point)) * r_scale            has_residual only, float32 steps:
//            DequantizeLinear(r) then the Add, each product and sum rounded to float32
//   result = f                                                      out_type float32
//          | clamp(round_half_even(f / y_scale) + y_zero_point, y_min, y_max)
//                                                                   out_type int8 / uint8
// c is the output channel (a convolution's M, a matrix product's column). y_min and
// y_max are the output type's range, narrowed where a Relu or Clip between the product
// (or, with a residual, the add) and its QuantizeLinear was folded into the saturation.
//
// The residual (quant_convolution only, has_residual): an 8-bit tensor of the result's
// lens, the last input (after the bias), with its own scale and zero point. It is the
// residual add of a CNN block fused into the block's last convolution:
// DQ(x) -> Conv(DQ(w), bias) -> Add(conv, DQ(r)) [-> Relu / Clip] -> Q, as quantize_int8
// writes it (the convolution's float result is not quantized before the add; fuse_qdq).
// With a float32 result the steps are exactly those of the unfused float graph
// (quant_convolution to float32, DequantizeLinear(r), Add); with an 8-bit one the folded
// Relu/Clip and QuantizeLinear follow as for any product (Q is monotone). The cpu target
// runs it as oneDNN's in-place sum post-op (a level of difference allowed, as for its
// requantize).
#pragma once
#include "ops/nn_conv.hpp"

#include <kiln/operation.hpp>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

// A residual added to each value before the requantize (quant_convolution's).
struct requantize_residual {
    const argument* r = nullptr;  // one value per result element, in row-major order
    float scale = 1.0f;
    std::int64_t zero_point = 0;
};

struct requantize_params {
    float x_scale = 1.0f;
    std::int64_t x_zero_point = 0;
    std::vector<float> w_scales{1.0f};  // one, or one per output channel
    std::int64_t w_zero_point = 0;
    bool has_bias = false;              // the third input: int32 (accumulator units) or float32
    type out_type = type::float32;
    float y_scale = 1.0f;
    std::int64_t y_zero_point = 0;
    std::int64_t y_min = 0;
    std::int64_t y_max = 0;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.x_scale, "x_scale");
        f(self.x_zero_point, "x_zero_point");
        f(self.w_scales, "w_scales");
        f(self.w_zero_point, "w_zero_point");
        f(self.has_bias, "has_bias");
        f(self.out_type, "out_type");
        f(self.y_scale, "y_scale");
        f(self.y_zero_point, "y_zero_point");
        f(self.y_min, "y_min");
        f(self.y_max, "y_max");
    }
    bool quantized_output() const { return out_type != type::float32; }
    float channel_scale(std::size_t c) const { return x_scale * w_scales[w_scales.size() == 1 ? 0 : c]; }
    // Validates the parameters against x, w, the bias and `channels` output channels;
    // `extra` inputs follow (a residual).
    void check(const std::string& op_name, const std::vector<shape>& inputs, std::size_t channels,
               std::size_t extra = 0) const;
    // The result of accumulators `acc` (int32 result of the integer op, row-major) whose
    // channel is (i / inner) % channels.
    argument requantize(const shape& out, const argument& acc, const std::vector<argument>& args, std::size_t inner,
                        std::size_t channels, const requantize_residual& res = requantize_residual{}) const;
};

// Inputs (x, w[, bias][, r]): x uint8/int8 (N, C, spatial...), w int8/uint8 (M, C/group,
// k...), r (has_residual) uint8/int8 of the result's lens.
struct quant_convolution : conv_attributes, requantize_params {
    bool has_residual = false;  // the last input: a residual added before the requantize
    float r_scale = 1.0f;
    std::int64_t r_zero_point = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        conv_attributes::reflect(self, f);
        requantize_params::reflect(self, f);
        // Absent from .kiln files saved before the residual form: they load as false / 1 / 0.
        f(self.has_residual, "has_residual");
        f(self.r_scale, "r_scale");
        f(self.r_zero_point, "r_zero_point");
    }
    std::string name() const { return "quant_convolution"; }
    std::size_t residual_index() const { return has_bias ? 3 : 2; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (a, b[, bias]), 8-bit, NumPy matmul shapes; w_scales per column of b.
struct quant_dot : requantize_params {
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        requantize_params::reflect(self, f);
    }
    std::string name() const { return "quant_dot"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (a, b), 8-bit, equal lens: QuantizeLinear(DequantizeLinear(a) + DequantizeLinear(b))
// with one scale and zero point each, computed as the ONNX ops are (float32 steps), so
// the fused op equals the unfused group exactly. A residual add between quantized blocks.
struct quant_add {
    float a_scale = 1.0f;
    std::int64_t a_zero_point = 0;
    float b_scale = 1.0f;
    std::int64_t b_zero_point = 0;
    float y_scale = 1.0f;
    std::int64_t y_zero_point = 0;
    type out_type = type::uint8;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.a_scale, "a_scale");
        f(self.a_zero_point, "a_zero_point");
        f(self.b_scale, "b_scale");
        f(self.b_zero_point, "b_zero_point");
        f(self.y_scale, "y_scale");
        f(self.y_zero_point, "y_zero_point");
        f(self.out_type, "out_type");
    }
    std::string name() const { return "quant_add"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    // One element, in the float32 steps of DequantizeLinear, Add and QuantizeLinear
    // (before saturation: the caller clamps to out_type's range).
    float apply(float a, float b) const {
        const float x = (a - static_cast<float>(a_zero_point)) * a_scale + (b - static_cast<float>(b_zero_point)) * b_scale;
        return std::nearbyint(x / y_scale) + static_cast<float>(y_zero_point);
    }
};

}  // namespace kiln::op
