#include "ops/softmax.hpp"

#include "ops/common.hpp"
#include "ops/norm_common.hpp"

#include <kiln/register_op.hpp>

#include <cmath>
#include <limits>

namespace kiln::op {

void softmax_inplace(double* p, std::size_t n, std::size_t stride, bool log) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) m = std::max(m, p[i * stride]);
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += std::exp(p[i * stride] - m);
    if (log) {
        const double ls = std::log(sum);
        for (std::size_t i = 0; i < n; ++i) p[i * stride] = p[i * stride] - m - ls;
    } else {
        for (std::size_t i = 0; i < n; ++i) p[i * stride] = std::exp(p[i * stride] - m) / sum;
    }
}

shape softmax_base::compute_shape(const std::string& name, const std::vector<shape>& inputs) const {
    check_num_inputs(name, inputs, 1);
    const auto& x = inputs[0];
    check_rank(name, x, 1, 64);
    check_float(name, x);
    normalize_axis(axis, x.ndim(), name);
    return x.as_standard();
}

argument softmax_base::compute(softmax_kind k, const std::string& name, const std::vector<argument>& args) const {
    const auto& s = args.at(0).get_shape();
    auto ax = normalize_axis(axis, s.ndim(), name);
    auto sp = split_at(s.lens(), ax);
    auto v = read_doubles(args[0]);
    // An empty tensor (a zero-length axis with non-empty outer or inner dims) has nothing
    // to normalise, and offsets into its empty buffer would be pointer arithmetic on null.
    if (v.empty()) return write_doubles(s, v);
    for (std::size_t o = 0; o < sp.outer; ++o) {
        for (std::size_t in = 0; in < sp.inner; ++in) {
            double* p = v.data() + o * sp.n * sp.inner + in;
            if (k == softmax_kind::hardmax) {
                // The first maximum wins (ONNX: ties go to the lowest index).
                std::size_t best = 0;
                for (std::size_t i = 1; i < sp.n; ++i)
                    if (p[i * sp.inner] > p[best * sp.inner]) best = i;
                for (std::size_t i = 0; i < sp.n; ++i) p[i * sp.inner] = i == best ? 1.0 : 0.0;
            } else {
                softmax_inplace(p, sp.n, sp.inner, k == softmax_kind::log_softmax);
            }
        }
    }
    return write_doubles(s, v);
}

KILN_REGISTER_OP(softmax)
KILN_REGISTER_OP(log_softmax)
KILN_REGISTER_OP(hardmax)

}  // namespace kiln::op
