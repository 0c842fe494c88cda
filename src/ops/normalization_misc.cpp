// Lp normalization, mean-variance normalization and local response normalization.
#include "ops/normalization.hpp"

#include "ops/common.hpp"
#include "ops/norm_common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::op {

shape lp_norm::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    check_rank(name(), inputs[0], 1, 64);
    check_float(name(), inputs[0]);
    normalize_axis(axis, inputs[0].ndim(), name());
    if (p != 1 && p != 2) throw_error(error_code::unsupported, name() + ": p must be 1 or 2, got " + std::to_string(p));
    return inputs[0].as_standard();
}

argument lp_norm::compute(const shape& out, const std::vector<argument>& args) const {
    auto sp = split_at(out.lens(), normalize_axis(axis, out.ndim(), name()));
    auto x = read_doubles(args[0]);
    for (std::size_t o = 0; o < sp.outer; ++o)
        for (std::size_t in = 0; in < sp.inner; ++in) {
            double* q = x.data() + o * sp.n * sp.inner + in;
            double norm = 0;
            for (std::size_t i = 0; i < sp.n; ++i) norm += p == 1 ? std::abs(q[i * sp.inner]) : q[i * sp.inner] * q[i * sp.inner];
            if (p == 2) norm = std::sqrt(norm);
            // A zero vector stays zero (the ONNX reference output) instead of 0/0.
            for (std::size_t i = 0; i < sp.n; ++i) q[i * sp.inner] = norm == 0.0 ? 0.0 : q[i * sp.inner] / norm;
        }
    return write_doubles(out, x);
}

shape mean_variance_norm::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    check_rank(name(), inputs[0], 1, 64);
    check_float(name(), inputs[0]);
    normalize_axes(axes, inputs[0].ndim(), name());
    return inputs[0].as_standard();
}

argument mean_variance_norm::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& lens = out.lens();
    auto ax = normalize_axes(axes, lens.size(), name());
    // Offset of each element's statistics slot: the element's index with the
    // normalized axes dropped.
    std::vector<std::size_t> kl(lens);
    for (auto a : ax) kl[a] = 1;
    auto ks = shape::standard_strides(kl);
    for (auto a : ax) ks[a] = 0;
    const std::size_t n_stats = product(kl, 0, kl.size());
    std::size_t count = 1;
    for (auto a : ax) count *= lens[a];
    auto x = read_doubles(args[0]);
    std::vector<std::size_t> slot(x.size());
    std::vector<std::size_t> idx(lens.size(), 0);
    for (std::size_t i = 0; i < x.size(); ++i) {
        std::size_t o = 0;
        for (std::size_t d = 0; d < lens.size(); ++d) o += idx[d] * ks[d];
        slot[i] = o;
        next_index(idx, lens);
    }
    std::vector<double> s1(n_stats, 0.0), s2(n_stats, 0.0);
    for (std::size_t i = 0; i < x.size(); ++i) {
        s1[slot[i]] += x[i];
        s2[slot[i]] += x[i] * x[i];
    }
    // As the ONNX function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double m = s1[slot[i]] / static_cast<double>(count);
        const double var = s2[slot[i]] / static_cast<double>(count) - m * m;
        x[i] = (x[i] - m) / (std::sqrt(std::max(var, 0.0)) + 1e-9);
    }
    return write_doubles(out, x);
}

shape lrn::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    check_rank(name(), inputs[0], 2, 64);
    check_float(name(), inputs[0]);
    if (size <= 0) throw_error(error_code::shape, name() + ": size must be positive, got " + std::to_string(size));
    return inputs[0].as_standard();
}

argument lrn::compute(const shape& out, const std::vector<argument>& args) const {
    auto sp = split_at(out.lens(), 1);
    auto x = read_doubles(args[0]);
    std::vector<double> y(x.size());
    const auto lo_half = static_cast<std::int64_t>((size - 1) / 2);
    const auto hi_half = static_cast<std::int64_t>(size - 1 - (size - 1) / 2);
    const auto c_max = static_cast<std::int64_t>(sp.n) - 1;
    for (std::size_t n = 0; n < sp.outer; ++n)
        for (std::size_t c = 0; c < sp.n; ++c)
            for (std::size_t i = 0; i < sp.inner; ++i) {
                const auto ci = static_cast<std::int64_t>(c);
                double sq = 0;
                for (auto k = std::max<std::int64_t>(0, ci - lo_half); k <= std::min(c_max, ci + hi_half); ++k) {
                    const double v = x[(n * sp.n + static_cast<std::size_t>(k)) * sp.inner + i];
                    sq += v * v;
                }
                const std::size_t at = (n * sp.n + c) * sp.inner + i;
                y[at] = x[at] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
            }
    return write_doubles(out, y);
}

KILN_REGISTER_OP(lp_norm)
KILN_REGISTER_OP(mean_variance_norm)
KILN_REGISTER_OP(lrn)

}  // namespace kiln::op
