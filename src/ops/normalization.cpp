// Layer, RMS, batch, instance and group normalization (reference kernels in double).
#include "ops/normalization.hpp"

#include "ops/common.hpp"
#include "ops/nn_common.hpp"
#include "ops/norm_common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::op {

namespace {

// `a` broadcast (NumPy rules) to lens, read as doubles in row-major order.
std::vector<double> read_broadcast(const argument& a, const std::vector<std::size_t>& lens, const std::string& op,
                                   const std::string& label) {
    const auto& s = a.get_shape();
    if (broadcast_lens({lens, s.lens()}, op) != lens)
        throw_error(error_code::shape, op + ": " + label + " " + s.to_string() + " does not broadcast to the input");
    return read_doubles(a.reshape(broadcast_to(s, lens)));
}

void check_broadcastable(const std::string& op, const shape& x, const shape& p, const std::string& label) {
    check_float(op, p, label);
    if (p.get_type() != x.get_type())
        throw_error(error_code::type, op + ": " + label + " has type " + std::string(type_name(p.get_type())) +
                                          ", expected " + std::string(type_name(x.get_type())) + " like the input");
    if (broadcast_lens({x.lens(), p.lens()}, op) != x.lens())
        throw_error(error_code::shape, op + ": " + label + " " + p.to_string() + " does not broadcast to input " +
                                           x.to_string());
}

// Checks a per-channel parameter (1-D, C elements) of an N x C x ... input.
void check_channel_param(const std::string& op, const shape& x, const shape& p, std::size_t c, const std::string& label) {
    check_float(op, p, label);
    if (p.ndim() != 1 || p.lens()[0] != c)
        throw_error(error_code::shape, op + ": " + label + " must have shape [" + std::to_string(c) + "], got " +
                                           p.to_string() + " for input " + x.to_string());
}

// Mean and 1/sqrt(var + eps) of each row of `cols` values.
void row_stats(const double* p, std::size_t cols, double eps, double& mean, double& inv) {
    double s = 0;
    for (std::size_t i = 0; i < cols; ++i) s += p[i];
    mean = cols ? s / static_cast<double>(cols) : 0.0;
    double v = 0;
    for (std::size_t i = 0; i < cols; ++i) v += (p[i] - mean) * (p[i] - mean);
    v = cols ? v / static_cast<double>(cols) : 0.0;
    inv = 1.0 / std::sqrt(v + eps);
}

std::size_t checked_axis(std::int64_t axis, const shape& x, const std::string& op) {
    return normalize_axis(axis, x.ndim(), op);
}

}  // namespace

shape layer_norm::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2, 3);
    const auto& x = inputs[0];
    check_rank(name(), x, 1, 64, "X");
    check_float(name(), x, "X");
    checked_axis(axis, x, name());
    check_broadcastable(name(), x, inputs[1], "scale");
    if (inputs.size() == 3) check_broadcastable(name(), x, inputs[2], "bias");
    return x.as_standard();
}

argument layer_norm::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& lens = out.lens();
    auto ax = checked_axis(axis, out, name());
    const std::size_t rows = product(lens, 0, ax), cols = product(lens, ax, lens.size());
    auto x = read_doubles(args[0]);
    // Scale and bias: one value per element of a row (the usual [C]), read once; else
    // broadcast to the whole input.
    auto per_row = [&](const argument& a) {
        const auto& l = a.get_shape().lens();
        std::size_t lead = 0;
        while (lead < l.size() && l[lead] == 1 && l.size() - lead > lens.size() - ax) ++lead;
        return l.size() - lead == lens.size() - ax && std::equal(l.begin() + static_cast<std::ptrdiff_t>(lead), l.end(),
                                                                 lens.begin() + static_cast<std::ptrdiff_t>(ax));
    };
    auto read_param = [&](const argument& a, const char* label, std::size_t& stride) {
        if (per_row(a)) {
            stride = 0;
            return read_doubles(a);
        }
        stride = cols;
        return read_broadcast(a, lens, name(), label);
    };
    std::size_t sc_stride = 0, b_stride = 0;
    auto sc = read_param(args[1], "scale", sc_stride);
    std::vector<double> b = args.size() == 3 ? read_param(args[2], "bias", b_stride) : std::vector<double>(cols, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
        double* p = x.data() + r * cols;
        const double* g = sc.data() + r * sc_stride;
        const double* c = b.data() + r * b_stride;
        double mean = 0, inv = 0;
        row_stats(p, cols, epsilon, mean, inv);
        for (std::size_t i = 0; i < cols; ++i) p[i] = (p[i] - mean) * inv * g[i] + c[i];
    }
    return write_doubles(out, x);
}

shape layer_norm_stats::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    const auto& x = inputs[0];
    check_rank(name(), x, 1, 64, "X");
    check_float(name(), x, "X");
    auto ax = checked_axis(axis, x, name());
    auto l = x.lens();
    for (std::size_t i = ax; i < l.size(); ++i) l[i] = 1;
    if (!is_float(stash)) throw_error(error_code::type, name() + ": the stash type must be a floating-point type");
    shape s(stash, l);
    return shape::tuple({s, s});
}

argument layer_norm_stats::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& lens = args[0].get_shape().lens();
    auto ax = checked_axis(axis, args[0].get_shape(), name());
    const std::size_t rows = product(lens, 0, ax), cols = product(lens, ax, lens.size());
    auto x = read_doubles(args[0]);
    std::vector<double> mean(rows), inv(rows);
    for (std::size_t r = 0; r < rows; ++r) row_stats(x.data() + r * cols, cols, epsilon, mean[r], inv[r]);
    return argument::make_tuple({write_doubles(out.sub_shapes()[0], mean), write_doubles(out.sub_shapes()[1], inv)});
}

shape rms_norm::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2);
    const auto& x = inputs[0];
    check_rank(name(), x, 1, 64, "X");
    check_float(name(), x, "X");
    checked_axis(axis, x, name());
    check_broadcastable(name(), x, inputs[1], "scale");
    return x.as_standard();
}

argument rms_norm::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& lens = out.lens();
    auto ax = checked_axis(axis, out, name());
    const std::size_t rows = product(lens, 0, ax), cols = product(lens, ax, lens.size());
    auto x = read_doubles(args[0]);
    auto sc = read_broadcast(args[1], lens, name(), "scale");
    for (std::size_t r = 0; r < rows; ++r) {
        double* p = x.data() + r * cols;
        double ss = 0;
        for (std::size_t i = 0; i < cols; ++i) ss += p[i] * p[i];
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(cols ? cols : 1) + epsilon);
        for (std::size_t i = 0; i < cols; ++i) p[i] = p[i] * inv * sc[r * cols + i];
    }
    return write_doubles(out, x);
}

namespace {
shape check_batch_norm(const std::string& op, const std::vector<shape>& inputs) {
    check_num_inputs(op, inputs, 5);
    const auto& x = inputs[0];
    check_rank(op, x, 2, 64, "X");
    check_float(op, x, "X");
    const std::size_t c = x.lens()[1];
    const char* labels[] = {"scale", "B", "input_mean", "input_var"};
    for (std::size_t i = 1; i < 5; ++i) check_channel_param(op, x, inputs[i], c, labels[i - 1]);
    return x.as_standard();
}

// y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c] for an N x C x ... input.
std::vector<double> batch_normalize(const std::vector<double>& x, const std::vector<std::size_t>& lens,
                                    const std::vector<double>& sc, const std::vector<double>& b,
                                    const std::vector<double>& mean, const std::vector<double>& var, double eps) {
    auto sp = split_at(lens, 1);
    std::vector<double> y(x.size());
    for (std::size_t n = 0; n < sp.outer; ++n)
        for (std::size_t c = 0; c < sp.n; ++c) {
            const double inv = 1.0 / std::sqrt(var[c] + eps);
            const std::size_t base = (n * sp.n + c) * sp.inner;
            for (std::size_t i = 0; i < sp.inner; ++i) y[base + i] = (x[base + i] - mean[c]) * inv * sc[c] + b[c];
        }
    return y;
}
}  // namespace

batch_norm_inference::channel_scale_shift batch_norm_inference::scale_shift(const std::vector<double>& scale,
                                                                              const std::vector<double>& bias,
                                                                              const std::vector<double>& mean,
                                                                              const std::vector<double>& var) const {
    channel_scale_shift r;
    for (std::size_t c = 0; c < scale.size(); ++c) {
        const double s = scale[c] / std::sqrt(var[c] + static_cast<double>(epsilon));
        r.s.push_back(s);
        r.t.push_back(bias[c] - mean[c] * s);
    }
    return r;
}

shape batch_norm_inference::compute_shape(const std::vector<shape>& inputs) const {
    return check_batch_norm(name(), inputs);
}

argument batch_norm_inference::compute(const shape& out, const std::vector<argument>& args) const {
    auto y = batch_normalize(read_doubles(args[0]), out.lens(), read_doubles(args[1]), read_doubles(args[2]),
                             read_doubles(args[3]), read_doubles(args[4]), epsilon);
    return write_doubles(out, y);
}

shape batch_norm_training::compute_shape(const std::vector<shape>& inputs) const {
    auto y = check_batch_norm(name(), inputs);
    return shape::tuple({y, inputs[3].as_standard(), inputs[4].as_standard()});
}

argument batch_norm_training::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& lens = out.sub_shapes()[0].lens();
    auto x = read_doubles(args[0]);
    auto sp = split_at(lens, 1);
    const double count = static_cast<double>(sp.outer * sp.inner);
    std::vector<double> bmean(sp.n, 0.0), bvar(sp.n, 0.0);
    for (std::size_t n = 0; n < sp.outer; ++n)
        for (std::size_t c = 0; c < sp.n; ++c)
            for (std::size_t i = 0; i < sp.inner; ++i) bmean[c] += x[(n * sp.n + c) * sp.inner + i];
    for (auto& m : bmean) m /= count;
    for (std::size_t n = 0; n < sp.outer; ++n)
        for (std::size_t c = 0; c < sp.n; ++c)
            for (std::size_t i = 0; i < sp.inner; ++i) {
                const double d = x[(n * sp.n + c) * sp.inner + i] - bmean[c];
                bvar[c] += d * d;
            }
    for (auto& v : bvar) v /= count;
    auto y = batch_normalize(x, lens, read_doubles(args[1]), read_doubles(args[2]), bmean, bvar, epsilon);
    auto rm = read_doubles(args[3]);
    auto rv = read_doubles(args[4]);
    for (std::size_t c = 0; c < sp.n; ++c) {
        rm[c] = rm[c] * momentum + bmean[c] * (1.0 - momentum);
        rv[c] = rv[c] * momentum + bvar[c] * (1.0 - momentum);
    }
    return argument::make_tuple({write_doubles(out.sub_shapes()[0], y), write_doubles(out.sub_shapes()[1], rm),
                                 write_doubles(out.sub_shapes()[2], rv)});
}

namespace {
// Normalizes each (n, group) block of an N x C x ... input, then applies the
// per-channel (or per-group) scale and bias.
// Groups of channels normalized: x (N, C, ...) read as T (in place when it is standard
// and of that type), statistics in double, the result written as T. A channel's scale and
// bias are applied over its own run of elements (no division per element: FCOS's
// GroupNorms over 100x100 maps were 5.5 ns an element through doubles).
template <class T>
argument group_normalize_as(const shape& out, const argument& xa, const argument& sa, const argument& ba,
                            std::size_t groups, bool per_group, double eps) {
    const auto& lens = xa.get_shape().lens();
    const auto x = read_as<T>(xa);
    auto sc = read_doubles(sa);
    auto b = read_doubles(ba);
    auto sp = split_at(lens, 1);
    const std::size_t cpg = sp.n / groups;
    const std::size_t block = cpg * sp.inner;
    return produce<T>(out, [&](T* y) {
        for (std::size_t n = 0; n < sp.outer; ++n)
            for (std::size_t g = 0; g < groups; ++g) {
                const std::size_t first = (n * sp.n + g * cpg) * sp.inner;
                const T* p = x.data() + first;
                double sum = 0;
                for (std::size_t i = 0; i < block; ++i) sum += static_cast<double>(p[i]);
                const double mean = block ? sum / static_cast<double>(block) : 0.0;
                double var = 0;
                for (std::size_t i = 0; i < block; ++i) {
                    const double d = static_cast<double>(p[i]) - mean;
                    var += d * d;
                }
                var = block ? var / static_cast<double>(block) : 0.0;
                const double inv = 1.0 / std::sqrt(var + eps);
                for (std::size_t ci = 0; ci < cpg; ++ci) {
                    const std::size_t k = per_group ? g : g * cpg + ci;
                    const T* pc = p + ci * sp.inner;
                    T* yc = y + first + ci * sp.inner;
                    for (std::size_t i = 0; i < sp.inner; ++i)
                        yc[i] = static_cast<T>((static_cast<double>(pc[i]) - mean) * inv * sc[k] + b[k]);
                }
            }
    });
}

argument group_normalize(const shape& out, const argument& xa, const argument& sa, const argument& ba,
                         std::size_t groups, bool per_group, double eps) {
    if (xa.get_shape().get_type() == type::float32)
        return group_normalize_as<float>(out, xa, sa, ba, groups, per_group, eps);
    return group_normalize_as<double>(out, xa, sa, ba, groups, per_group, eps);
}
}  // namespace

shape instance_norm::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 3);
    const auto& x = inputs[0];
    check_rank(name(), x, 2, 64, "input");
    check_float(name(), x);
    check_channel_param(name(), x, inputs[1], x.lens()[1], "scale");
    check_channel_param(name(), x, inputs[2], x.lens()[1], "B");
    return x.as_standard();
}

argument instance_norm::compute(const shape& out, const std::vector<argument>& args) const {
    const std::size_t c = out.lens()[1];
    return group_normalize(out, args[0], args[1], args[2], c, false, epsilon);
}

shape group_norm::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 3);
    const auto& x = inputs[0];
    check_rank(name(), x, 2, 64, "X");
    check_float(name(), x, "X");
    const std::size_t c = x.lens()[1];
    if (num_groups <= 0 || c % static_cast<std::size_t>(num_groups) != 0)
        throw_error(error_code::shape, name() + ": num_groups " + std::to_string(num_groups) +
                                           " must be positive and divide the channel count " + std::to_string(c));
    const std::size_t k = per_group_scale ? static_cast<std::size_t>(num_groups) : c;
    check_channel_param(name(), x, inputs[1], k, "scale");
    check_channel_param(name(), x, inputs[2], k, "bias");
    return x.as_standard();
}

argument group_norm::compute(const shape& out, const std::vector<argument>& args) const {
    return group_normalize(out, args[0], args[1], args[2], static_cast<std::size_t>(num_groups), per_group_scale,
                           epsilon);
}

KILN_REGISTER_OP(layer_norm)
KILN_REGISTER_OP(layer_norm_stats)
KILN_REGISTER_OP(rms_norm)
KILN_REGISTER_OP(batch_norm_inference)
KILN_REGISTER_OP(batch_norm_training)
KILN_REGISTER_OP(instance_norm)
KILN_REGISTER_OP(group_norm)

}  // namespace kiln::op
