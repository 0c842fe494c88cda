#include "ops/loss.hpp"

#include "ops/common.hpp"
#include "ops/norm_common.hpp"
#include "ops/softmax.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

namespace {

// Validates (input N x C x d1.., target N x d1.., weight C) and returns the loss shape.
shape loss_shape(const std::string& op, const std::string& reduction, const std::vector<shape>& inputs) {
    check_num_inputs(op, inputs, 2, 3);
    const auto& x = inputs[0];
    const auto& t = inputs[1];
    check_rank(op, x, 2, 64, "input");
    check_float(op, x, "input");
    if (!is_integer(t.get_type()))
        throw_error(error_code::type, op + ": target must be an integer tensor, got " + t.to_string());
    std::vector<std::size_t> want(x.lens());
    want.erase(want.begin() + 1);
    if (t.lens() != want)
        throw_error(error_code::shape, op + ": target " + t.to_string() + " must have the input's shape " +
                                           x.to_string() + " without the class dimension");
    if (inputs.size() == 3) {
        const auto& w = inputs[2];
        check_float(op, w, "weight");
        if (w.ndim() != 1 || w.lens()[0] != x.lens()[1])
            throw_error(error_code::shape, op + ": weight must have shape [" + std::to_string(x.lens()[1]) + "], got " +
                                               w.to_string());
    }
    if (reduction == "none") return shape(x.get_type(), want);
    if (reduction == "sum" || reduction == "mean") return shape(x.get_type());
    throw_error(error_code::unsupported, op + ": unknown reduction '" + reduction + "'");
}

// Negative log-likelihood of log-probabilities `logp` (N x C x D, row-major).
std::vector<double> nll(const std::vector<double>& logp, const std::vector<std::size_t>& lens, const argument& target,
                        const argument* weight, const std::string& reduction, std::optional<std::int64_t> ignore,
                        const std::string& op) {
    auto sp = split_at(lens, 1);
    auto tgt = target.to_vector<std::int64_t>();
    std::vector<double> w = weight ? read_doubles(*weight) : std::vector<double>(sp.n, 1.0);
    std::vector<double> loss(sp.outer * sp.inner, 0.0);
    double wsum = 0, lsum = 0;
    for (std::size_t n = 0; n < sp.outer; ++n)
        for (std::size_t d = 0; d < sp.inner; ++d) {
            const std::int64_t c = tgt[n * sp.inner + d];
            if (ignore && c == *ignore) continue;
            if (c < 0 || static_cast<std::size_t>(c) >= sp.n)
                throw_error(error_code::invalid_argument, op + ": target value " + std::to_string(c) +
                                                              " is outside [0, " + std::to_string(sp.n) + ")");
            const double wc = w[static_cast<std::size_t>(c)];
            const double l = -logp[(n * sp.n + static_cast<std::size_t>(c)) * sp.inner + d] * wc;
            loss[n * sp.inner + d] = l;
            lsum += l;
            wsum += wc;
        }
    if (reduction == "none") return loss;
    if (reduction == "sum") return {lsum};
    return {lsum / wsum};
}

}  // namespace

shape nll_loss::compute_shape(const std::vector<shape>& inputs) const { return loss_shape(name(), reduction, inputs); }

argument nll_loss::compute(const shape& out, const std::vector<argument>& args) const {
    auto r = nll(read_doubles(args[0]), args[0].get_shape().lens(), args[1], args.size() == 3 ? &args[2] : nullptr,
                 reduction, ignore_index, name());
    return write_doubles(out, r);
}

shape softmax_cross_entropy_loss::compute_shape(const std::vector<shape>& inputs) const {
    auto loss = loss_shape(name(), reduction, inputs);
    return shape::tuple({loss, inputs[0].as_standard()});
}

argument softmax_cross_entropy_loss::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& lens = args[0].get_shape().lens();
    auto logp = read_doubles(args[0]);
    auto sp = split_at(lens, 1);
    for (std::size_t n = 0; n < sp.outer; ++n)
        for (std::size_t d = 0; d < sp.inner; ++d) softmax_inplace(logp.data() + n * sp.n * sp.inner + d, sp.n, sp.inner, true);
    auto r = nll(logp, lens, args[1], args.size() == 3 ? &args[2] : nullptr, reduction, ignore_index, name());
    return argument::make_tuple({write_doubles(out.sub_shapes()[0], r), write_doubles(out.sub_shapes()[1], logp)});
}

KILN_REGISTER_OP(nll_loss)
KILN_REGISTER_OP(softmax_cross_entropy_loss)

}  // namespace kiln::op
