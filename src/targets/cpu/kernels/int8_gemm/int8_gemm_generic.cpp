// The exact int8 GEMM for any CPU (and for checking the vector one): one row and one panel
// at a time, in int32, the requantize of int8_gemm_args.hpp in plain C++.
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/kernels/int8_gemm/requant_generic.hpp"

#include <algorithm>

namespace kiln::cpu::i8g {
namespace {

void gemm(const gemm_args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    const std::size_t k2 = pairs(g.k);
    for (std::size_t p = p0; p < p1; ++p) {
        const std::size_t width = std::min(panel, g.n - p * panel);
        const std::int16_t* b = g.b + p * k2 * panel * 2;
        for (std::size_t i = m0; i < m1; ++i) {
            std::int32_t acc[panel] = {};
            for (std::size_t k = 0; k < g.k; ++k) {
                const std::int32_t a = g.a_signed ? static_cast<const std::int8_t*>(g.a)[i * g.lda + k]
                                                  : static_cast<const std::uint8_t*>(g.a)[i * g.lda + k];
                const std::int16_t* bk = b + (k / 2) * panel * 2 + k % 2;
                for (std::size_t j = 0; j < panel; ++j) acc[j] += a * bk[j * 2];
            }
            for (std::size_t j = 0; j < width; ++j) {
                const std::size_t c = p * panel + j;
                store_value(g.q, g.c, i * g.ldc + c, acc[j] + g.q.comp[c], c);
            }
        }
    }
}

}  // namespace

gemm_fn generic_gemm() { return gemm; }

}  // namespace kiln::cpu::i8g
