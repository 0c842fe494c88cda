// The one matrix-product loop nest of the reference target, shared by matmul, gemm,
// convolution (after im2col) and deconvolution.
//
// It is the textbook triple loop with two refinements that keep it readable while making
// ResNet-sized models run in seconds: the innermost loop runs over contiguous columns of
// B and C (so the compiler vectorizes it and no floating-point reduction has to be
// reordered), and four rows of C share each loaded row of B.
#pragma once
#include <algorithm>
#include <cstddef>

namespace kiln::op {

// C[m * ldc + n] (+)= sum_k A(m, k) * B[k * ldb + n] for m < M, n < N, k < K.
// A(m, k) is a[m * a_row + k * a_col], so A may be a transposed view.
template <class T>
void gemm_kernel(std::size_t M, std::size_t N, std::size_t K, const T* a, std::ptrdiff_t a_row,
                 std::ptrdiff_t a_col, const T* b, std::ptrdiff_t ldb, T* c, std::ptrdiff_t ldc, bool accumulate) {
    constexpr std::size_t mr = 4;    // rows of C updated together
    constexpr std::size_t nb = 256;  // columns of C kept in a local accumulator
    T acc[mr][nb];
    for (std::size_t m0 = 0; m0 < M; m0 += mr) {
        const std::size_t mb = std::min(mr, M - m0);
        for (std::size_t n0 = 0; n0 < N; n0 += nb) {
            const std::size_t nn = std::min(nb, N - n0);
            for (std::size_t i = 0; i < mr; ++i)
                for (std::size_t j = 0; j < nn; ++j) acc[i][j] = T(0);
            for (std::size_t k = 0; k < K; ++k) {
                const T* brow = b + static_cast<std::ptrdiff_t>(k) * ldb + static_cast<std::ptrdiff_t>(n0);
                const auto at = [&](std::size_t i) {
                    return a[static_cast<std::ptrdiff_t>(m0 + i) * a_row + static_cast<std::ptrdiff_t>(k) * a_col];
                };
                if (mb == mr) {
                    const T a0 = at(0), a1 = at(1), a2 = at(2), a3 = at(3);
                    for (std::size_t j = 0; j < nn; ++j) {
                        const T bv = brow[j];
                        acc[0][j] += a0 * bv;
                        acc[1][j] += a1 * bv;
                        acc[2][j] += a2 * bv;
                        acc[3][j] += a3 * bv;
                    }
                } else {
                    for (std::size_t i = 0; i < mb; ++i) {
                        const T ai = at(i);
                        for (std::size_t j = 0; j < nn; ++j) acc[i][j] += ai * brow[j];
                    }
                }
            }
            for (std::size_t i = 0; i < mb; ++i) {
                T* crow = c + static_cast<std::ptrdiff_t>(m0 + i) * ldc + static_cast<std::ptrdiff_t>(n0);
                if (accumulate)
                    for (std::size_t j = 0; j < nn; ++j) crow[j] += acc[i][j];
                else
                    for (std::size_t j = 0; j < nn; ++j) crow[j] = acc[i][j];
            }
        }
    }
}

}  // namespace kiln::op
