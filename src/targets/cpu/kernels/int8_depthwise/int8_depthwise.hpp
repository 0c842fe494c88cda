// cpu::int8_depthwise: a depthwise 3x3 quant_convolution (group = input = output channels,
// any stride and padding, no dilation) on Kiln's own exact int8 kernel, channels-last u8/s8
// in and out, for CPUs without a VNNI int8 dot product (as cpu::int8_gemm, int8_gemm.hpp:
// the same requantize, bit-equal to the ref target; AVX2 or portable by cpuid at load).
// MobileNetV2 has 17 of them. The AVX2 kernel (int8_depthwise_avx2.cpp) pairs the taps
// vertically over a scratch row of widened input columns, one output row and 16 channels
// at a time; the portable one is a plain loop per tap.
//
// Inputs: (x channels-last, weights int16 [9][padded c], comp int32 (the int32 bias where
// f32_exact), scale float32, dparams float64 [3][padded c], output buffer channels-last).
#pragma once
#include "targets/cpu/cpu_options.hpp"
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct int8_depthwise {
    std::int64_t x_zero_point = 0;
    std::vector<std::int64_t> stride{1, 1}, pad{0, 0};  // pad: the top and left padding
    type out_type = type::float32;
    float y_scale = 1.0f;
    std::int64_t y_zero_point = 0, y_min = 0, y_max = 0;
    bool f32_exact = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.x_zero_point, "x_zero_point");
        f(self.stride, "stride");
        f(self.pad, "pad");
        f(self.out_type, "out_type");
        f(self.y_scale, "y_scale");
        f(self.y_zero_point, "y_zero_point");
        f(self.y_min, "y_min");
        f(self.y_max, "y_max");
        f(self.f32_exact, "f32_exact");
    }
    std::string name() const { return "cpu::int8_depthwise"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
    std::string isa() const;

    i8g::dw_fn kernel = nullptr;  // chosen in finalize
};

// The rule (selection.cpp's condition; dequantize_without_vnni leaves what it takes).
bool int8_depthwise_takes(module& m, instruction_ref ins, const cpu_options& o);
// The shapes it can take on any CPU (its AVX2 kernel is exact with VNNI too: exhaustive_tune
// measures it against oneDNN's there).
bool int8_depthwise_fits(instruction_ref ins);
bool lower_int8_depthwise(lower_env& env, instruction_ref ins);
// Wherever int8_depthwise_fits, its rule aside (a tuned choice, tuning_int8.hpp).
bool lower_int8_depthwise_anywhere(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
