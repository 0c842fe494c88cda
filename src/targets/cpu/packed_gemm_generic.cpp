// The packed GEMM for any x86-64 CPU (the compiler's baseline ISA): the same blocking
// as the AVX2 kernels (packed_gemm_avx2.cpp), with a 6 x 16 tile of C in a local array
// the compiler vectorizes as it can; results equal to fp32 rounding.
#include "targets/cpu/packed_gemm_args.hpp"

#include <algorithm>

namespace kiln::cpu::pgemm {
namespace {

float apply(const post_step& s, float v, const float* src, std::size_t j) {
    switch (s.kind) {
    case post_kind::linear: return s.alpha * v + s.beta;
    case post_kind::relu: return v > 0.0f ? v : s.alpha * v;
    case post_kind::clip: return std::min(std::max(v, s.alpha), s.beta);
    case post_kind::add: return v + src[j];
    case post_kind::sub: return v - src[j];
    case post_kind::mul: return v * src[j];
    case post_kind::max: return std::max(v, src[j]);
    case post_kind::min: return std::min(v, src[j]);
    }
    return v;
}

template <int R>
void tile(const args& g, std::size_t i, std::size_t p, std::size_t k0, std::size_t kc, bool first, bool last,
          std::size_t width) {
    const float* a = g.a + i * g.k + k0;
    const float* b = g.b + (p * g.k + k0) * panel;
    float* out = g.c + i * g.n + p * panel;
    float acc[R][panel];
    for (int r = 0; r < R; ++r)
        for (std::size_t j = 0; j < panel; ++j) acc[r][j] = first || j >= width ? 0.0f : out[r * g.n + j];
    for (std::size_t k = 0; k < kc; ++k)
        for (int r = 0; r < R; ++r) {
            const float av = a[r * g.k + k];
            for (std::size_t j = 0; j < panel; ++j) acc[r][j] += av * b[k * panel + j];
        }
    if (last) {
        const std::size_t col = p * panel;
        for (int r = 0; r < R; ++r) {
            for (std::size_t j = 0; j < width; ++j) {
                float v = acc[r][j];
                if (g.bias) v += g.bias[col + j];
                for (int s = 0; s < g.n_post; ++s) {
                    const post_step& st = g.post[s];
                    const float* src = st.src ? st.src + (i + static_cast<std::size_t>(r)) * st.row_stride + col : nullptr;
                    v = apply(st, v, src, j);
                }
                acc[r][j] = v;
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (std::size_t j = 0; j < width; ++j) out[r * g.n + j] = acc[r][j];
}

void part(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    for (std::size_t k0 = 0; k0 < g.k; k0 += g.kc) {
        const std::size_t kc = std::min(g.kc, g.k - k0);
        const bool first = k0 == 0, last = k0 + kc == g.k;
        for (std::size_t p = p0; p < p1; ++p) {
            const std::size_t width = std::min(panel, g.n - p * panel);
            std::size_t i = m0;
            for (; i + tile_rows <= m1; i += tile_rows) tile<6>(g, i, p, k0, kc, first, last, width);
            switch (m1 - i) {
            case 5: tile<5>(g, i, p, k0, kc, first, last, width); break;
            case 4: tile<4>(g, i, p, k0, kc, first, last, width); break;
            case 3: tile<3>(g, i, p, k0, kc, first, last, width); break;
            case 2: tile<2>(g, i, p, k0, kc, first, last, width); break;
            case 1: tile<1>(g, i, p, k0, kc, first, last, width); break;
            default: break;
            }
        }
    }
}

}  // namespace

part_fn generic_part() { return part; }

}  // namespace kiln::cpu::pgemm
