// Kiln's own loops for the quantized elementwise work of QDQ models, in the ONNX float32
// steps so that they equal ref: one pass each, compiled for AVX-512 (x86-64-v4), AVX2 and
// the baseline, picked by cpuid (target_clones). The lowerings are in op_quant.cpp.
#pragma once
#include "ops/quant_fused.hpp"

#include <kiln/context.hpp>
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

// op::quant_add over (a, b, output buffer) in one pass, all three in the same packed
// layout (channels-last residuals): Kiln's own loop, vectorized by the compiler (round
// half to even by the 1.5 * 2^23 addition, which the default rounding mode does).
struct quant_add_kernel {
    op::quant_add op;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
    }
    std::string name() const { return "cpu::quant_add"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// QuantizeLinear / DequantizeLinear with one scale and zero point over (x, output buffer)
// in one packed layout: one vectorized pass in the ONNX float32 steps (x / scale, round
// half to even, zero point, saturate; (q - zero point) * scale), so it equals ref. oneDNN
// 2.6's reorder with a scale and a zero point took 44 us per [128, 256] tensor (BERT),
// this loop a few.
//
// `channels_last` (quantize only): x a row-major NCHW float32 tensor of 1-4 channels (an
// image model's input) and the result channels-last, the layout its first quantized
// convolution reads: the channels interleaved in the same pass. MobileNetV2's 3x224x224
// input took 47 us to quantize plus 48 us for oneDNN 2.6's u8 nchw -> nhwc reorder (its
// generic jit:uni kernel) on a Zen 5 EPYC, one thread.
struct quant_linear_kernel {
    bool dequantize = false;
    float scale = 1.0f;
    std::int64_t zero_point = 0;
    type out_type = type::uint8;
    bool channels_last = false;
    static constexpr std::size_t max_interleaved_channels = 4;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.dequantize, "dequantize");
        f(self.scale, "scale");
        f(self.zero_point, "zero_point");
        f(self.out_type, "out_type");
        f(self.channels_last, "channels_last");
    }
    std::string name() const { return "cpu::quant_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

}  // namespace kiln::cpu
