// The packed GEMM for any x86-64 CPU (the compiler's baseline ISA): the same blocking
// as the AVX2 kernels (packed_gemm_avx2.cpp), with tiles of 2 rows x 16 columns held in
// 4-float vectors (GCC vector extensions: SSE2 on the x86-64 baseline, 8 accumulators and
// 4 panel vectors fit its 16 registers); results equal to fp32 rounding.
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace kiln::cpu::pgemm {
namespace {

float apply(const post_step& s, float v, const float* src, std::size_t j) {
    switch (s.kind) {
    case post_kind::linear: return s.alpha * v + s.beta;
    case post_kind::relu: return v > 0.0f ? v : s.alpha * v;
    case post_kind::clip: return std::min(std::max(v, s.alpha), s.beta);
    case post_kind::gelu_erf: return gelu_erf_scalar(v);
    case post_kind::hardswish: return v * std::min(std::max(std::fma(v, 1.0f / 6.0f, 0.5f), 0.0f), 1.0f);
    case post_kind::add: return v + src[j];
    case post_kind::sub: return v - src[j];
    case post_kind::mul: return v * src[j];
    case post_kind::max: return std::max(v, src[j]);
    case post_kind::min: return std::min(v, src[j]);
    }
    return v;
}

using v4 = float __attribute__((vector_size(16)));
constexpr std::size_t generic_rows = 2;

inline v4 load4(const float* p) {
    v4 v;
    std::memcpy(&v, p, sizeof(v));
    return v;
}

template <int R>
void tile(const args& g, std::size_t i, std::size_t p, std::size_t k0, std::size_t kc, bool first, bool last,
          std::size_t width) {
    const std::size_t lda = a_stride(g);
    const float* a = g.a + i * lda + k0;
    const float* b = g.b + (p * g.k + k0) * panel;
    // Column j of row r: the row's and the half's base (C may be channel-blocked), then j % 8.
    auto at = [&](int r, std::size_t j) {
        return row_offset(g, i + static_cast<std::size_t>(r)) + col_offset(g, p * panel + (j / 8) * 8) + j % 8;
    };
    v4 vacc[R][4] = {};
    for (std::size_t k = 0; k < kc; ++k) {
        const v4 b0 = load4(b + k * panel), b1 = load4(b + k * panel + 4), b2 = load4(b + k * panel + 8),
                 b3 = load4(b + k * panel + 12);
        for (int r = 0; r < R; ++r) {
            const float x = a[r * lda + k];
            const v4 av = {x, x, x, x};
            vacc[r][0] += av * b0;
            vacc[r][1] += av * b1;
            vacc[r][2] += av * b2;
            vacc[r][3] += av * b3;
        }
    }
    float acc[R][panel];
    for (int r = 0; r < R; ++r) {
        std::memcpy(acc[r], vacc[r], sizeof(acc[r]));
        if (!first)
            for (std::size_t j = 0; j < width; ++j) acc[r][j] += g.c[at(r, j)];
    }
    if (last) {
        const std::size_t col = p * panel;
        for (int r = 0; r < R; ++r) {
            for (std::size_t j = 0; j < width; ++j) {
                float v = acc[r][j];
                if (g.bias) v += g.bias[col + j];
                for (int s = 0; s < g.n_post; ++s) {
                    const post_step& st = g.post[s];
                    const float* src = !st.src ? nullptr : st.full ? st.src + at(r, j) : st.src + col + j;
                    v = apply(st, v, src, 0);
                }
                acc[r][j] = v;
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (std::size_t j = 0; j < width; ++j) g.c[at(r, j)] = acc[r][j];
}

void part(const args& g, std::size_t m0, std::size_t m1, std::size_t p0, std::size_t p1) {
    for (std::size_t k0 = 0; k0 < g.k; k0 += g.kc) {
        const std::size_t kc = std::min(g.kc, g.k - k0);
        const bool first = k0 == 0 && !g.accumulate, last = k0 + kc == g.k;
        for (std::size_t p = p0; p < p1; ++p) {
            const std::size_t width = std::min(panel, g.n - p * panel);
            std::size_t i = m0;
            for (; i + generic_rows <= m1; i += generic_rows) tile<2>(g, i, p, k0, kc, first, last, width);
            if (i < m1) tile<1>(g, i, p, k0, kc, first, last, width);
        }
    }
}

}  // namespace

part_fn generic_part() { return part; }

}  // namespace kiln::cpu::pgemm
