// op::quant_add's loop for AVX-512 CPUs (quant_add_avx512.cpp): call only where
// cpu::has_avx512() is true. Equal to the portable loop and to ref, bit for bit.
#pragma once
#include "ops/quant_fused.hpp"

#include <cstddef>
#include <cstdint>

namespace kiln::cpu {

void quant_add_avx512(const op::quant_add& p, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                      std::size_t n);
void quant_add_avx512(const op::quant_add& p, const std::int8_t* a, const std::int8_t* b, std::int8_t* y,
                      std::size_t n);

}  // namespace kiln::cpu
