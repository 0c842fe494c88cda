#include "ops/nn_grid.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <array>
#include <cmath>

namespace kiln::op {

namespace {

double unnormalize(double g, std::int64_t size, bool align_corners) {
    const auto n = static_cast<double>(size);
    return align_corners ? (g + 1.0) / 2.0 * (n - 1.0) : ((g + 1.0) * n - 1.0) / 2.0;
}

// Reflects x into [lo2 / 2, hi2 / 2] (bounds given doubled so they stay integers).
double reflect(double x, double lo2, double hi2) {
    if (lo2 == hi2) return 0.0;
    const double lo = lo2 / 2.0, span = (hi2 - lo2) / 2.0;
    x = std::fabs(x - lo);
    const double extra = std::fmod(x, span);
    const auto flips = static_cast<std::int64_t>(std::floor(x / span));
    return flips % 2 == 0 ? extra + lo : span - extra + lo;
}

// The padding mode applied to a coordinate: border clamps, reflection mirrors at the
// borders (the pixel edges without align_corners, the centers with it), then clamps.
double apply_padding(double x, std::int64_t size, grid_padding mode, bool align_corners) {
    const double hi = static_cast<double>(size - 1);
    if (mode == grid_padding::border) return std::clamp(x, 0.0, hi);
    if (mode == grid_padding::reflection) {
        x = align_corners ? reflect(x, 0.0, 2.0 * hi) : reflect(x, -1.0, 2.0 * static_cast<double>(size) - 1.0);
        return std::clamp(x, 0.0, hi);
    }
    return x;
}

void cubic_coefficients(double t, double c[4]) {
    constexpr double a = -0.75;
    auto near = [](double x) { return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0; };        // |x| <= 1
    auto far = [](double x) { return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a; };  // 1 < |x| < 2
    c[0] = far(t + 1.0);
    c[1] = near(t);
    c[2] = near(1.0 - t);
    c[3] = far(2.0 - t);
}

struct tap {
    std::int64_t offset;
    double weight;
};

}  // namespace

shape grid_sample::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2);
    const auto& x = inputs[0];
    const auto& g = inputs[1];
    check_rank(name(), x, 3, 64, "input x");
    check_rank(name(), g, x.ndim(), x.ndim(), "grid");
    if (!is_float_compute_type(x.get_type()) || !is_float_compute_type(g.get_type()))
        throw_error(error_code::type, name() + ": x " + x.to_string() + " and grid " + g.to_string() +
                                          " must be floating-point");
    const std::size_t r = x.ndim() - 2;
    if (g.lens()[0] != x.lens()[0] || g.lens().back() != r)
        throw_error(error_code::shape, name() + ": grid " + g.to_string() + " must be (N, out..., " + std::to_string(r) +
                                           ") for x " + x.to_string());
    std::vector<std::size_t> lens{x.lens()[0], x.lens()[1]};
    lens.insert(lens.end(), g.lens().begin() + 1, g.lens().end() - 1);
    return shape(x.get_type(), lens);
}

argument grid_sample::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& xs = args[0].get_shape();
    const std::size_t r = xs.ndim() - 2;
    const auto in = spatial_dims(xs);
    const auto in_strides = row_major_strides(in);
    const std::int64_t batch = static_cast<std::int64_t>(xs.lens()[0]), channels = static_cast<std::int64_t>(xs.lens()[1]);
    const std::int64_t plane = product(in), positions = product(spatial_dims(out));
    auto x = read_as<double>(args[0]);
    auto grid = read_as<double>(args[1]);
    return produce<double>(out, [&](double* y) {
        std::vector<double> u(r);
        std::vector<tap> taps;
        for (std::int64_t n = 0; n < batch; ++n) {
            for (std::int64_t p = 0; p < positions; ++p) {
                // Grid coordinates come innermost dim first: (x, y, z) for (..., D, H, W).
                for (std::size_t d = 0; d < r; ++d)
                    u[d] = unnormalize(grid[static_cast<std::size_t>((n * positions + p) * static_cast<std::int64_t>(r)) +
                                            (r - 1 - d)],
                                       in[d], align_corners);
                taps.clear();
                if (mode == grid_mode::nearest || mode == grid_mode::linear) {
                    const bool nearest = mode == grid_mode::nearest;
                    for (std::size_t corner = 0; corner < (nearest ? 1u : (std::size_t{1} << r)); ++corner) {
                        tap t{0, 1.0};
                        bool inside = true;
                        for (std::size_t d = 0; d < r; ++d) {
                            const double pos = apply_padding(u[d], in[d], padding_mode, align_corners);
                            std::int64_t i;
                            if (nearest) {
                                i = static_cast<std::int64_t>(std::nearbyint(pos));
                            } else {
                                const double lo = std::floor(pos);
                                const bool up = ((corner >> d) & 1) != 0;
                                i = static_cast<std::int64_t>(lo) + (up ? 1 : 0);
                                t.weight *= up ? pos - lo : 1.0 - (pos - lo);
                            }
                            inside = inside && i >= 0 && i < in[d];
                            t.offset += i * in_strides[d];
                        }
                        if (inside) taps.push_back(t);
                    }
                } else {
                    // 4 taps per dim around floor(u), each tap index padded on its own.
                    std::vector<std::array<double, 4>> coef(r);
                    std::vector<std::array<std::int64_t, 4>> index(r);
                    std::vector<std::array<bool, 4>> valid(r);
                    for (std::size_t d = 0; d < r; ++d) {
                        const double lo = std::floor(u[d]);
                        cubic_coefficients(u[d] - lo, coef[d].data());
                        for (int k = 0; k < 4; ++k) {
                            double pos = apply_padding(lo - 1.0 + k, in[d], padding_mode, align_corners);
                            const auto i = static_cast<std::int64_t>(pos);
                            index[d][k] = i;
                            valid[d][k] = pos == std::floor(pos) && i >= 0 && i < in[d];
                        }
                    }
                    std::size_t combos = 1;
                    for (std::size_t d = 0; d < r; ++d) combos *= 4;
                    for (std::size_t c = 0; c < combos; ++c) {
                        tap t{0, 1.0};
                        bool inside = true;
                        std::size_t rest = c;
                        for (std::size_t d = 0; d < r; ++d, rest /= 4) {
                            const std::size_t k = rest % 4;
                            inside = inside && valid[d][k];
                            t.weight *= coef[d][k];
                            t.offset += index[d][k] * in_strides[d];
                        }
                        if (inside) taps.push_back(t);
                    }
                }
                for (std::int64_t c = 0; c < channels; ++c) {
                    const double* xc = x.data() + (n * channels + c) * plane;
                    double v = 0.0;
                    for (const auto& t : taps) v += t.weight * xc[t.offset];
                    y[(n * channels + c) * positions + p] = v;
                }
            }
        }
    });
}

shape affine_grid::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, size.empty() ? 2 : 1);
    const auto& theta = inputs[0];
    if (!is_float_compute_type(theta.get_type()))
        throw_error(error_code::type, name() + ": theta " + theta.to_string() + " must be floating-point");
    if (!theta.is_tensor() || theta.ndim() != 3)
        throw_error(error_code::shape, name() + ": theta " + theta.to_string() + " must be (N, r, r + 1)");
    if (!size.empty()) {
        const std::size_t r = size.size() - 2;
        if (size.size() < 3 || std::any_of(size.begin(), size.end(), [](auto v) { return v < 0; }))
            throw_error(error_code::shape, name() + ": size must be (N, C, D1, ...) with no negative values");
        if (!theta.dynamic() && (theta.lens()[0] != static_cast<std::size_t>(size[0]) || theta.lens()[1] != r ||
                                 theta.lens()[2] != r + 1))
            throw_error(error_code::shape, name() + ": theta " + theta.to_string() + " does not fit size (N=" +
                                               std::to_string(size[0]) + ", " + std::to_string(r) + " spatial dims)");
        std::vector<std::size_t> lens{static_cast<std::size_t>(size[0])};
        for (std::size_t d = 0; d < r; ++d) lens.push_back(static_cast<std::size_t>(size[d + 2]));
        lens.push_back(r);
        return shape(theta.get_type(), lens);
    }
    const auto& s = inputs[1];
    if (!s.is_tensor() || s.dynamic() || s.ndim() != 1 || s.lens()[0] < 3 || !is_integer(s.get_type()))
        throw_error(error_code::shape, name() + ": size " + s.to_string() + " must be a 1-D integer tensor (N, C, D1, ...)");
    const std::size_t r = s.lens()[0] - 2;
    std::vector<dynamic_dimension> dims(r + 1, dynamic_dimension{0, dynamic_dimension::unbounded, {}});
    dims.push_back({r, r, {}});
    return shape::make_dynamic(theta.get_type(), dims);
}

argument affine_grid::compute(const shape&, const std::vector<argument>& args) const {
    std::vector<std::int64_t> sz = size.empty() ? to_int64_vector(args[1]) : size;
    std::vector<shape> in{args[0].get_shape()};
    auto op = *this;
    op.size = sz;
    const shape out = op.compute_shape(in);
    const std::size_t r = sz.size() - 2;
    std::vector<std::int64_t> dims(sz.begin() + 2, sz.end());
    const std::int64_t positions = product(dims);
    auto theta = read_as<double>(args[0]);
    // Normalized coordinate of index i along a dim of n positions.
    auto coord = [&](std::int64_t i, std::int64_t n) {
        if (align_corners) return n <= 1 ? 0.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(n - 1);
        return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(n) - 1.0;
    };
    return produce<double>(out, [&](double* y) {
        std::vector<std::int64_t> idx(r, 0);
        std::vector<double> v(r + 1, 1.0);
        for (std::int64_t n = 0; n < sz[0]; ++n) {
            const double* t = theta.data() + n * static_cast<std::int64_t>(r * (r + 1));
            std::fill(idx.begin(), idx.end(), 0);
            for (std::int64_t p = 0; p < positions; ++p) {
                // (x, y, z) is the innermost dim first.
                for (std::size_t d = 0; d < r; ++d) v[d] = coord(idx[r - 1 - d], dims[r - 1 - d]);
                double* o = y + (n * positions + p) * static_cast<std::int64_t>(r);
                for (std::size_t i = 0; i < r; ++i) {
                    double acc = 0.0;
                    for (std::size_t j = 0; j <= r; ++j) acc += t[i * (r + 1) + j] * v[j];
                    o[i] = acc;
                }
                for (std::size_t d = r; d-- > 0;) {
                    if (++idx[d] < dims[d]) break;
                    idx[d] = 0;
                }
            }
        }
    });
}

KILN_REGISTER_OP(grid_sample)
KILN_REGISTER_OP(affine_grid)

}  // namespace kiln::op
