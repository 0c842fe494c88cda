// Reference convolution and transposed convolution over any number of spatial dims.
//
// Convolution is computed per (batch, group) as weights [M_g x C_g*K] times the im2col
// matrix [C_g*K x P] (P output positions), in tiles of output positions so the
// im2col buffer stays small; a 1x1 kernel with unit stride and no padding uses the
// input directly. Transposed convolution is the adjoint: weights^T times the input,
// then each column is scattered back to the output (col2im).
#pragma once
#include "ops/nn_common.hpp"
#include "ops/nn_gemm_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kiln::op {

struct conv_geometry {
    std::int64_t batch = 0, in_channels = 0, out_channels = 0, group = 1;
    std::vector<std::int64_t> in;         // input spatial dims
    std::vector<std::int64_t> kernel;     // kernel spatial dims
    std::vector<std::int64_t> out;        // output spatial dims
    std::vector<std::int64_t> stride, dilation, pad_begin;
    std::size_t rank() const { return in.size(); }
};

// For output positions [p0, p0 + count) (row-major over `out`), the first input
// coordinate each window touches per spatial dim: o * stride - pad_begin.
inline std::vector<std::vector<std::int64_t>> window_starts(const conv_geometry& g, std::int64_t p0,
                                                           std::int64_t count) {
    const std::size_t r = g.rank();
    std::vector<std::vector<std::int64_t>> base(r, std::vector<std::int64_t>(static_cast<std::size_t>(count)));
    std::vector<std::int64_t> o(r);
    std::int64_t rest = p0;
    for (std::size_t d = r; d-- > 0;) {
        o[d] = rest % g.out[d];
        rest /= g.out[d];
    }
    for (std::int64_t p = 0; p < count; ++p) {
        for (std::size_t d = 0; d < r; ++d) base[d][static_cast<std::size_t>(p)] = o[d] * g.stride[d] - g.pad_begin[d];
        for (std::size_t d = r; d-- > 0;) {
            if (++o[d] < g.out[d]) break;
            o[d] = 0;
        }
    }
    return base;
}

// col[(c * K + k) * count + p] = x[c][window(p) + k * dilation], 0 outside the input.
template <class A>
void im2col(const conv_geometry& g, const A* x, std::int64_t channels, std::int64_t p0, std::int64_t count,
            A* col) {
    const std::size_t r = g.rank();
    const auto base = window_starts(g, p0, count);
    const auto in_strides = row_major_strides(g.in);
    const std::int64_t plane = product(g.in);
    const std::int64_t kernel_size = product(g.kernel);
    std::vector<std::int64_t> k(r, 0);
    for (std::int64_t kk = 0; kk < kernel_size; ++kk) {
        for (std::int64_t c = 0; c < channels; ++c) {
            const A* xc = x + c * plane;
            A* row = col + (c * kernel_size + kk) * count;
            for (std::int64_t p = 0; p < count; ++p) {
                std::int64_t offset = 0;
                bool inside = true;
                for (std::size_t d = 0; d < r; ++d) {
                    const std::int64_t i = base[d][static_cast<std::size_t>(p)] + k[d] * g.dilation[d];
                    inside = inside && i >= 0 && i < g.in[d];
                    offset += i * in_strides[d];
                }
                row[p] = inside ? xc[offset] : A(0);
            }
        }
        for (std::size_t d = r; d-- > 0;) {
            if (++k[d] < g.kernel[d]) break;
            k[d] = 0;
        }
    }
}

// Output positions per tile: enough to amortize the loop overhead, few enough that the
// im2col tile (rows * tile elements) stays in cache.
inline std::int64_t conv_tile(std::int64_t rows, std::int64_t positions) {
    const std::int64_t t = std::max<std::int64_t>(64, (std::int64_t{1} << 17) / std::max<std::int64_t>(rows, 1));
    return std::min(t, std::max<std::int64_t>(positions, 1));
}

// y[n][m][p] = bias[m] + sum_{c, k} w[m][c][k] * x[n][g*C_g + c][window(p) + k * dilation].
// x, w, y row-major; bias may be null. A is the accumulation type.
template <class A>
void conv_forward(const conv_geometry& g, const A* x, const A* w, const A* bias, A* y) {
    const std::int64_t cg = g.in_channels / g.group, mg = g.out_channels / g.group;
    const std::int64_t positions = product(g.out), plane = product(g.in), kernel_size = product(g.kernel);
    const std::int64_t rows = cg * kernel_size;
    bool direct = true;  // 1x1, unit stride, no padding: the input is its own im2col matrix
    for (std::size_t d = 0; d < g.rank(); ++d)
        direct = direct && g.kernel[d] == 1 && g.stride[d] == 1 && g.pad_begin[d] == 0 && g.out[d] == g.in[d];
    const std::int64_t tile = conv_tile(rows, positions);
    std::vector<A> col(direct ? 0 : static_cast<std::size_t>(rows * tile));
    for (std::int64_t n = 0; n < g.batch; ++n) {
        for (std::int64_t gi = 0; gi < g.group; ++gi) {
            const A* xg = x + (n * g.in_channels + gi * cg) * plane;
            const A* wg = w + gi * mg * rows;
            A* yg = y + (n * g.out_channels + gi * mg) * positions;
            for (std::int64_t p0 = 0; p0 < positions; p0 += tile) {
                const std::int64_t count = std::min(tile, positions - p0);
                if (direct) {
                    gemm_kernel<A>(mg, count, rows, wg, rows, 1, xg + p0, plane, yg + p0, positions, false);
                } else {
                    im2col(g, xg, cg, p0, count, col.data());
                    gemm_kernel<A>(mg, count, rows, wg, rows, 1, col.data(), count, yg + p0, positions, false);
                }
            }
            if (bias)
                for (std::int64_t m = 0; m < mg; ++m) {
                    const A b = bias[gi * mg + m];
                    A* row = yg + m * positions;
                    for (std::int64_t p = 0; p < positions; ++p) row[p] += b;
                }
        }
    }
}

// Transposed convolution. Here g.in is the input (smaller) and g.out the output;
// w is [C_in][M_g][kernel...]. Input position i and kernel offset k contribute to
// output position i * stride + k * dilation - pad_begin when that lies inside.
template <class A>
void deconv_forward(const conv_geometry& g, const A* x, const A* w, const A* bias, A* y) {
    const std::size_t r = g.rank();
    const std::int64_t cg = g.in_channels / g.group, mg = g.out_channels / g.group;
    const std::int64_t in_plane = product(g.in), out_plane = product(g.out), kernel_size = product(g.kernel);
    const std::int64_t rows = mg * kernel_size;
    const auto out_strides = row_major_strides(g.out);
    std::fill(y, y + g.batch * g.out_channels * out_plane, A(0));
    const std::int64_t tile = conv_tile(rows, in_plane);
    std::vector<A> col(static_cast<std::size_t>(rows * tile));
    std::vector<std::int64_t> k(r), i(r);
    for (std::int64_t n = 0; n < g.batch; ++n) {
        for (std::int64_t gi = 0; gi < g.group; ++gi) {
            const A* xg = x + (n * g.in_channels + gi * cg) * in_plane;
            const A* wg = w + gi * cg * rows;
            A* yg = y + (n * g.out_channels + gi * mg) * out_plane;
            for (std::int64_t p0 = 0; p0 < in_plane; p0 += tile) {
                const std::int64_t count = std::min(tile, in_plane - p0);
                // col[(m, k)][p] = sum_c w[c][(m, k)] * x[c][p]: A is w transposed.
                gemm_kernel<A>(rows, count, cg, wg, 1, rows, xg + p0, in_plane, col.data(), count, false);
                std::fill(k.begin(), k.end(), 0);
                for (std::int64_t kk = 0; kk < kernel_size; ++kk) {
                    for (std::int64_t m = 0; m < mg; ++m) {
                        const A* row = col.data() + (m * kernel_size + kk) * count;
                        A* ym = yg + m * out_plane;
                        std::int64_t rest = p0;
                        for (std::size_t d = r; d-- > 0;) {
                            i[d] = rest % g.in[d];
                            rest /= g.in[d];
                        }
                        for (std::int64_t p = 0; p < count; ++p) {
                            std::int64_t offset = 0;
                            bool inside = true;
                            for (std::size_t d = 0; d < r; ++d) {
                                const std::int64_t o = i[d] * g.stride[d] + k[d] * g.dilation[d] - g.pad_begin[d];
                                inside = inside && o >= 0 && o < g.out[d];
                                offset += o * out_strides[d];
                            }
                            if (inside) ym[offset] += row[p];
                            for (std::size_t d = r; d-- > 0;) {
                                if (++i[d] < g.in[d]) break;
                                i[d] = 0;
                            }
                        }
                    }
                    for (std::size_t d = r; d-- > 0;) {
                        if (++k[d] < g.kernel[d]) break;
                        k[d] = 0;
                    }
                }
            }
            if (bias)
                for (std::int64_t m = 0; m < mg; ++m) {
                    const A b = bias[gi * mg + m];
                    A* row = yg + m * out_plane;
                    for (std::int64_t p = 0; p < out_plane; ++p) row[p] += b;
                }
        }
    }
}

}  // namespace kiln::op
