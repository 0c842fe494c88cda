// fp8 on a CPU without fp8 arithmetic (x86 has none: the GPU target is where fp8 is fast):
// a QuantizeLinear to float8 e4m3fn and the DequantizeLinear of the same per-tensor scale
// that reads it (quantize_fp8's activations) become one pass that rounds x / scale to e4m3fn
// in float32 registers (round half to even, saturating at +-448) and multiplies back, equal
// to the two ONNX ops; the products then run on the float32 kernels. The reference kernels
// take 50-60 us per 1000 values for the pair; this loop is compiled for AVX-512, AVX2 and
// the baseline (target_clones). Weights are dequantized once at compile time instead
// (fold_fp8_weights, src/targets/cpu/fp8_weights.hpp).
#pragma once
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

// The float32 value of v rounded to e4m3fn (saturating), as the ONNX cast gives it.
float round_to_e4m3fn(float v);

struct fp8_round_trip {
    float scale = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.scale, "scale");
    }
    std::string name() const { return "cpu::fp8_round_trip"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 1; }
};

// A dequantize_linear `ins` of a saturating e4m3fn quantize_linear with the same one scale
// (no zero point or a zero one) over a static float32 x: replaced by fp8_round_trip.
bool lower_fp8_round_trip(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
