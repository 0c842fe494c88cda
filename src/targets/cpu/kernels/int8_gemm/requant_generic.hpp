// The portable requantize and store of one accumulator (int8_gemm_args.hpp), shared by the
// generic kernels and the vector ones' remainders.
#pragma once
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"

#include <cmath>

namespace kiln::cpu::i8g {

// Element `at` of y (q.out's type) from accumulator acc of channel c.
inline void store_value(const requant& q, void* y, std::size_t at, std::int32_t acc, std::size_t c) {
    const float v = requant_value(q, acc, c);
    if (q.out == out_kind::f32) {
        static_cast<float*>(y)[at] = v;
        return;
    }
    float r = std::nearbyint(v / q.y_scale);
    if (std::isnan(r)) r = 0.0f;
    r = std::fmin(std::fmax(r + q.y_zero, q.y_min), q.y_max);
    if (q.out == out_kind::u8) static_cast<std::uint8_t*>(y)[at] = static_cast<std::uint8_t>(r);
    else static_cast<std::int8_t*>(y)[at] = static_cast<std::int8_t>(r);
}

}  // namespace kiln::cpu::i8g
