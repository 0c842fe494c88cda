// The int4 GEMM for any x86-64 CPU (and for checking the vector ones): one row and one
// panel at a time, each weight unpacked and dequantized where it is multiplied.
#include "targets/cpu/kernels/int4_gemm/int4_gemm_args.hpp"

#include <algorithm>

namespace kiln::cpu::int4g {
namespace {

void part(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    const std::size_t nb = blocks(g);
    for (std::size_t p = p0; p < p1; ++p) {
        const std::size_t width = std::min(panel, g.n - p * panel);
        const std::uint8_t* b = g.b + p * g.k * panel_bytes;
        const float* so = g.so + p * nb * 2 * panel;
        for (std::size_t i = m0; i < m1; ++i) {
            float acc[panel] = {};
            const float* a = g.a + i * g.k;
            for (std::size_t kb = 0; kb < g.k; kb += g.block) {
                const float* s = so + (kb / g.block) * 2 * panel;
                for (std::size_t k = kb; k < std::min(g.k, kb + g.block); ++k)
                    for (std::size_t j = 0; j < panel; ++j) {
                        const std::uint8_t byte = b[k * panel_bytes + j / 2];
                        const int u = j % 2 == 0 ? byte & 0x0F : byte >> 4;
                        acc[j] += a[k] * (static_cast<float>(u) * s[j] + s[panel + j]);
                    }
            }
            std::copy_n(acc, width, g.c + i * g.n + p * panel);
        }
    }
}

void unpack(const args& g, std::size_t p, std::size_t k0, std::size_t kc, float* out) {
    const std::size_t nb = blocks(g);
    const std::uint8_t* b = g.b + p * g.k * panel_bytes;
    for (std::size_t k = k0; k < k0 + kc; ++k) {
        const float* s = g.so + (p * nb + k / g.block) * 2 * panel;
        for (std::size_t j = 0; j < panel; ++j) {
            const std::uint8_t byte = b[k * panel_bytes + j / 2];
            out[(k - k0) * panel + j] = static_cast<float>(j % 2 == 0 ? byte & 0x0F : byte >> 4) * s[j] + s[panel + j];
        }
    }
}

}  // namespace

part_fn generic_part() { return part; }
unpack_fn generic_unpack() { return unpack; }

}  // namespace kiln::cpu::int4g
