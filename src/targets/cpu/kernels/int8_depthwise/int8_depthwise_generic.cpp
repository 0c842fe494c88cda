// The exact depthwise 3x3 int8 convolution for any CPU (and for checking the vector one).
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/kernels/int8_gemm/requant_generic.hpp"

namespace kiln::cpu::i8g {
namespace {

void depthwise(const dw_args& d, std::size_t r0, std::size_t r1) {
    const std::size_t cp = padded(d.c);
    for (std::size_t r = r0; r < r1; ++r) {
        const std::size_t n = r / d.oh, oy = r % d.oh;
        for (std::size_t ox = 0; ox < d.ow; ++ox)
            for (std::size_t c = 0; c < d.c; ++c) {
                std::int32_t acc = d.q.comp[c];
                for (std::size_t t = 0; t < 9; ++t) {
                    const auto iy = static_cast<std::ptrdiff_t>(oy * d.stride_h + t / 3) - static_cast<std::ptrdiff_t>(d.pad_h);
                    const auto ix = static_cast<std::ptrdiff_t>(ox * d.stride_w + t % 3) - static_cast<std::ptrdiff_t>(d.pad_w);
                    if (iy < 0 || ix < 0 || iy >= static_cast<std::ptrdiff_t>(d.h) || ix >= static_cast<std::ptrdiff_t>(d.w))
                        continue;
                    const std::size_t at = ((n * d.h + static_cast<std::size_t>(iy)) * d.w + static_cast<std::size_t>(ix)) * d.c + c;
                    const std::int32_t x = d.x_signed ? static_cast<const std::int8_t*>(d.x)[at]
                                                      : static_cast<const std::uint8_t*>(d.x)[at];
                    acc += (x - d.x_zero) * d.wt[dw_weight_index(t, c, cp)];
                }
                store_value(d.q, d.y, ((n * d.oh + oy) * d.ow + ox) * d.c + c, acc, c);
            }
    }
}

}  // namespace

dw_fn generic_depthwise() { return depthwise; }

}  // namespace kiln::cpu::i8g
