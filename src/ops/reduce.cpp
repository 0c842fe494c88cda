#include "ops/reduce.hpp"

#include "ops/common.hpp"
#include "ops/norm_common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace kiln::op {

std::string reduce_name(reduce_kind k) {
    switch (k) {
        case reduce_kind::sum: return "reduce_sum";
        case reduce_kind::mean: return "reduce_mean";
        case reduce_kind::max: return "reduce_max";
        case reduce_kind::min: return "reduce_min";
        case reduce_kind::prod: return "reduce_prod";
        case reduce_kind::l1: return "reduce_l1";
        case reduce_kind::l2: return "reduce_l2";
        case reduce_kind::log_sum: return "reduce_log_sum";
        case reduce_kind::log_sum_exp: return "reduce_log_sum_exp";
        case reduce_kind::sum_square: return "reduce_sum_square";
    }
    return "reduce";
}

namespace {

std::vector<std::size_t> output_lens(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& axes,
                                     bool keepdims) {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < lens.size(); ++i) {
        bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (!reduced) out.push_back(lens[i]);
        else if (keepdims) out.push_back(1);
    }
    return out;
}

// Static axes: validated and kept as given (the parser normalizes them).
std::vector<std::size_t> static_axes(const std::vector<std::int64_t>& axes, std::size_t rank, const std::string& name) {
    auto a = normalize_axes(axes, rank, name);
    std::sort(a.begin(), a.end());
    return a;
}

// Run-time axes with ONNX semantics.
std::vector<std::size_t> runtime_axes(const argument& axes_arg, std::size_t rank, bool noop, const std::string& name) {
    auto raw = to_int64_vector(axes_arg);
    if (raw.empty()) {
        if (noop) return {};
        std::vector<std::size_t> all(rank);
        for (std::size_t i = 0; i < rank; ++i) all[i] = i;
        return all;
    }
    return static_axes(raw, rank, name);
}

// Visits every input element in row-major order with the offset of its output
// element (reduced dimensions contribute nothing to that offset).
template <class F>
void for_each_pair(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& axes, F f) {
    const std::size_t rank = lens.size();
    std::vector<std::size_t> kl(lens);
    for (auto a : axes) kl[a] = 1;
    auto ks = shape::standard_strides(kl);
    for (auto a : axes) ks[a] = 0;
    std::size_t total = product(lens, 0, rank);
    if (total == 0) return;
    std::vector<std::size_t> idx(rank, 0);
    std::size_t off = 0;
    for (std::size_t i = 0; i < total; ++i) {
        f(i, off);
        for (std::size_t d = rank; d-- > 0;) {
            off += ks[d];
            if (++idx[d] < lens[d]) break;
            off -= ks[d] * idx[d];
            idx[d] = 0;
        }
    }
}

std::vector<double> reduce_double(reduce_kind k, const std::vector<double>& x, const std::vector<std::size_t>& lens,
                                  const std::vector<std::size_t>& axes, std::size_t n_out) {
    const double inf = std::numeric_limits<double>::infinity();
    std::size_t count = 1;
    for (auto a : axes) count *= lens[a];
    std::vector<double> acc(n_out, 0.0);
    if (k == reduce_kind::max) std::fill(acc.begin(), acc.end(), -inf);
    if (k == reduce_kind::min) std::fill(acc.begin(), acc.end(), inf);
    if (k == reduce_kind::prod) std::fill(acc.begin(), acc.end(), 1.0);
    std::vector<double> shift;
    if (k == reduce_kind::log_sum_exp) {
        shift.assign(n_out, -inf);
        for_each_pair(lens, axes, [&](std::size_t i, std::size_t o) { shift[o] = std::max(shift[o], x[i]); });
        for (auto& s : shift)
            if (!std::isfinite(s)) s = 0.0;  // all -inf (or empty): log(0) = -inf falls out below
    }
    for_each_pair(lens, axes, [&](std::size_t i, std::size_t o) {
        const double v = x[i];
        double& a = acc[o];
        switch (k) {
            case reduce_kind::sum:
            case reduce_kind::mean:
            case reduce_kind::log_sum: a += v; break;
            case reduce_kind::max: a = (std::isnan(v) || v > a) ? v : a; break;
            case reduce_kind::min: a = (std::isnan(v) || v < a) ? v : a; break;
            case reduce_kind::prod: a *= v; break;
            case reduce_kind::l1: a += std::abs(v); break;
            case reduce_kind::l2:
            case reduce_kind::sum_square: a += v * v; break;
            case reduce_kind::log_sum_exp: a += std::exp(v - shift[o]); break;
        }
    });
    for (std::size_t o = 0; o < n_out; ++o) {
        switch (k) {
            case reduce_kind::mean: acc[o] /= static_cast<double>(count); break;
            case reduce_kind::l2: acc[o] = std::sqrt(acc[o]); break;
            case reduce_kind::log_sum: acc[o] = std::log(acc[o]); break;
            case reduce_kind::log_sum_exp: acc[o] = std::log(acc[o]) + shift[o]; break;
            default: break;
        }
    }
    return acc;
}

// Exact integer reductions (sum, prod, max, min, l1, sum_square) wrap like the
// tensor's own integer type would; the rest go through double.
template <class C>
argument reduce_integer(reduce_kind k, const argument& x, const shape& out_shape, const std::vector<std::size_t>& lens,
                        const std::vector<std::size_t>& axes) {
    using S = std::conditional_t<std::is_unsigned_v<C> || std::is_same_v<C, bool>, unsigned long long, long long>;
    auto v = x.to_vector<S>();
    const std::size_t n_out = out_shape.elements();
    std::vector<S> acc(n_out, S(0));
    if (k == reduce_kind::max) std::fill(acc.begin(), acc.end(), std::numeric_limits<S>::lowest());
    if (k == reduce_kind::min) std::fill(acc.begin(), acc.end(), std::numeric_limits<S>::max());
    if (k == reduce_kind::prod) std::fill(acc.begin(), acc.end(), S(1));
    using U = unsigned long long;  // wrap-around arithmetic without signed overflow
    for_each_pair(lens, axes, [&](std::size_t i, std::size_t o) {
        const S e = v[i];
        S& a = acc[o];
        switch (k) {
            case reduce_kind::max: a = std::max(a, e); break;
            case reduce_kind::min: a = std::min(a, e); break;
            case reduce_kind::prod: a = static_cast<S>(static_cast<U>(a) * static_cast<U>(e)); break;
            case reduce_kind::l1: a = static_cast<S>(static_cast<U>(a) + static_cast<U>(e < S(0) ? S(0) - e : e)); break;
            case reduce_kind::sum_square: a = static_cast<S>(static_cast<U>(a) + static_cast<U>(e) * static_cast<U>(e)); break;
            default: a = static_cast<S>(static_cast<U>(a) + static_cast<U>(e)); break;
        }
    });
    argument out(out_shape);
    auto* p = out.data_as<C>();
    for (std::size_t o = 0; o < n_out; ++o) p[o] = convert<C>(acc[o]);
    return out;
}

bool exact_integer_kind(reduce_kind k) {
    return k == reduce_kind::sum || k == reduce_kind::prod || k == reduce_kind::max || k == reduce_kind::min ||
           k == reduce_kind::l1 || k == reduce_kind::sum_square;
}

}  // namespace

shape reduce_base::compute_shape(reduce_kind, const std::string& name, const std::vector<shape>& inputs) const {
    check_num_inputs(name, inputs, 1, 2);
    const auto& x = inputs[0];
    if (!x.is_tensor()) throw_error(error_code::shape, name + ": input must be a tensor, got " + x.to_string());
    if (x.get_type() == type::string) throw_unsupported_type(type::string, name);
    if (inputs.size() == 2) {
        const auto& a = inputs[1];
        if (!is_integer(a.get_type()) || a.ndim() > 1)
            throw_error(error_code::shape, name + ": axes input must be a 1-D integer tensor, got " + a.to_string());
        if (a.dynamic()) throw_error(error_code::shape, name + ": axes input must have a known length");
        const std::size_t rank = x.ndim();
        const std::size_t n_axes = a.elements();
        std::size_t out_rank = rank;
        if (!keepdims) out_rank = n_axes == 0 ? (noop_with_empty_axes ? rank : 0) : rank - std::min(rank, n_axes);
        std::vector<dynamic_dimension> dims(out_rank, dynamic_dimension{0, dynamic_dimension::unbounded, {}});
        return shape::make_dynamic(x.get_type(), dims);
    }
    auto ax = static_axes(axes, x.ndim(), name);
    if (x.dynamic()) {
        // Kept dimensions keep their ranges; reduced ones become 1 (or go).
        std::vector<dynamic_dimension> dims;
        const auto in = x.to_dynamic_dims();
        for (std::size_t i = 0; i < in.size(); ++i) {
            if (std::find(ax.begin(), ax.end(), i) == ax.end()) dims.push_back(in[i]);
            else if (keepdims) dims.push_back(dynamic_dimension{1, 1, {}});
        }
        return shape::make_dynamic(x.get_type(), dims);
    }
    return shape(x.get_type(), output_lens(x.lens(), ax, keepdims));
}

argument reduce_base::compute(reduce_kind k, const std::string& name, const std::vector<argument>& args) const {
    const auto& x = args.at(0);
    const auto& lens = x.get_shape().lens();
    auto ax = args.size() == 2 ? runtime_axes(args[1], lens.size(), noop_with_empty_axes, name)
                               : static_axes(axes, lens.size(), name);
    shape out_shape(x.get_shape().get_type(), output_lens(lens, ax, keepdims));
    const type t = out_shape.get_type();
    if ((is_integer(t) || t == type::bool_) && exact_integer_kind(k)) {
        auto r = visit_numeric(t, [&](auto tag) -> argument {
            using C = typename decltype(tag)::type;
            if constexpr (std::is_integral_v<C>) return reduce_integer<C>(k, x, out_shape, lens, ax);
            else return argument{};  // sub-byte integers: exact in double below
        }, name);
        if (!r.empty()) return r;
    }
    auto r = reduce_double(k, read_doubles(x), lens, ax, out_shape.elements());
    return write_doubles(out_shape, r);
}

KILN_REGISTER_OP(reduce_sum)
KILN_REGISTER_OP(reduce_mean)
KILN_REGISTER_OP(reduce_max)
KILN_REGISTER_OP(reduce_min)
KILN_REGISTER_OP(reduce_prod)
KILN_REGISTER_OP(reduce_l1)
KILN_REGISTER_OP(reduce_l2)
KILN_REGISTER_OP(reduce_log_sum)
KILN_REGISTER_OP(reduce_log_sum_exp)
KILN_REGISTER_OP(reduce_sum_square)

}  // namespace kiln::op
