// cpu::int8_im2col: the windows of a small-channel int8 convolution (MobileNetV2's first
// 3x3 over 3 channels) as rows, [pixels][cin * kh * kw] in the weights' order, so that
// cpu::int8_gemm computes it exactly like a 1x1 one. Taps outside the image hold the zero
// point: x - z is 0 there, as ref's zero padding of x - z, and the GEMM's compensation
// -z sum w covers every tap alike.
//
// Inputs: (x [n][cin][h][w] u8/s8 row-major, output buffer [n * oh * ow][cin * kh * kw]).
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct int8_im2col {
    std::vector<std::int64_t> kernel{3, 3}, stride{1, 1}, pad{0, 0};  // pad: top and left
    std::vector<std::int64_t> out{0, 0};                              // oh, ow
    std::int64_t x_zero_point = 0;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.kernel, "kernel");
        f(self.stride, "stride");
        f(self.pad, "pad");
        f(self.out, "out");
        f(self.x_zero_point, "x_zero_point");
    }
    std::string name() const { return "cpu::int8_im2col"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

}  // namespace kiln::cpu
