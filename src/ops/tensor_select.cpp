#include "ops/tensor_select.hpp"

#include "ops/tensor_gather.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::op {

namespace {

// Element values as something ordered: compute types for numbers, strings as they are.
template <class C>
using key_t = std::conditional_t<std::is_same_v<C, std::string>, std::string, compute_t<C>>;

template <class C>
std::vector<key_t<C>> keys_of(const argument& a) {
    argument c = a.contiguous();
    const std::size_t n = c.get_shape().elements();
    std::vector<key_t<C>> out(n);
    const C* p = c.template data_as<C>();
    for (std::size_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<C, std::string>) out[i] = p[i];
        else out[i] = convert<key_t<C>>(p[i]);
    }
    return out;
}

// outer/axis/inner extents of `lens` around axis a.
struct axis_split {
    std::size_t outer = 1, len = 1, inner = 1;
};
axis_split split_at(const std::vector<std::size_t>& lens, std::size_t a) {
    axis_split s;
    for (std::size_t d = 0; d < lens.size(); ++d) {
        if (d < a) s.outer *= lens[d];
        else if (d == a) s.len = lens[d];
        else s.inner *= lens[d];
    }
    return s;
}

argument int64_vector(const std::vector<std::int64_t>& v, std::vector<std::size_t> lens) {
    argument r(shape(type::int64, std::move(lens)));
    std::copy(v.begin(), v.end(), r.data_as<std::int64_t>());
    return r;
}

}  // namespace

// ---- arg_reduce

template <bool Max>
shape arg_reduce<Max>::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 1, 64);
    auto a = normalize_axis(axis, in[0].ndim(), name());
    auto lens = in[0].lens();
    if (lens[a] == 0) throw_error(error_code::shape, name() + ": axis " + std::to_string(a) + " is empty");
    if (keepdims) lens[a] = 1;
    else lens.erase(lens.begin() + static_cast<std::ptrdiff_t>(a));
    return shape(type::int64, lens);
}

template <bool Max>
argument arg_reduce<Max>::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& l = args[0].get_shape().lens();
    auto sp = split_at(l, normalize_axis(axis, l.size(), name()));
    argument r(out);
    auto* o = r.data_as<std::int64_t>();
    visit_numeric(args[0].get_shape().get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        auto v = keys_of<C>(args[0]);
        for (std::size_t p = 0; p < sp.outer; ++p)
            for (std::size_t q = 0; q < sp.inner; ++q) {
                std::size_t best = 0;
                auto at = [&](std::size_t j) { return v[(p * sp.len + j) * sp.inner + q]; };
                for (std::size_t j = 1; j < sp.len; ++j) {
                    auto x = at(j), b = at(best);
                    bool better = Max ? x > b : x < b;
                    if (better || (select_last_index && x == b)) best = j;
                }
                o[p * sp.inner + q] = static_cast<std::int64_t>(best);
            }
    }, name());
    return r;
}

template struct arg_reduce<true>;
template struct arg_reduce<false>;

// ---- topk

namespace {
shape topk_shapes(const shape& x, std::int64_t axis, std::optional<std::size_t> k, const std::string& op_name) {
    check_rank(op_name, x, 1, 64, "input");
    auto a = normalize_axis(axis, x.ndim(), op_name);
    auto dd = x.to_dynamic_dims();
    if (k && dd[a].is_fixed() && *k > dd[a].min)
        throw_error(error_code::shape, op_name + ": k = " + std::to_string(*k) + " exceeds axis " + std::to_string(a) +
                                           " of " + x.to_string());
    dd[a] = k ? dynamic_dimension{*k, *k, {}} : dynamic_dimension{0, dynamic_dimension::unbounded, {}};
    return shape::tuple({shape::make_dynamic(x.get_type(), dd), shape::make_dynamic(type::int64, dd)});
}

argument run_topk(const argument& x, std::int64_t axis, std::size_t k, bool largest, const std::string& op_name) {
    const auto& l = x.get_shape().lens();
    auto a = normalize_axis(axis, l.size(), op_name);
    if (k > l[a])
        throw_error(error_code::shape, op_name + ": k = " + std::to_string(k) + " exceeds axis " + std::to_string(a) +
                                           " of " + x.get_shape().to_string());
    auto sp = split_at(l, a);
    auto ol = l;
    ol[a] = k;
    argument values(shape(x.get_shape().get_type(), ol));
    argument indices(shape(type::int64, ol));
    argument src = x.contiguous();
    visit_numeric(x.get_shape().get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        auto v = keys_of<C>(src);
        const C* s = src.template data_as<C>();
        C* ov = values.template data_as<C>();
        auto* oi = indices.data_as<std::int64_t>();
        std::vector<std::size_t> order(sp.len);
        for (std::size_t p = 0; p < sp.outer; ++p)
            for (std::size_t q = 0; q < sp.inner; ++q) {
                auto pos = [&](std::size_t j) { return (p * sp.len + j) * sp.inner + q; };
                std::iota(order.begin(), order.end(), std::size_t{0});
                // The k first of the whole axis in order, equal values by ascending index (a
                // total order, so selecting the k and sorting only them gives what a stable
                // sort of the axis did: RetinaNet takes the top 1000 of a level's millions of
                // scores, 460 ms a call sorting all of them). NaN ranks above every number, as in PyTorch.
                auto before = [&](std::size_t i, std::size_t j) {
                    const auto& a = v[pos(i)];
                    const auto& b = v[pos(j)];
                    if constexpr (std::is_floating_point_v<std::decay_t<decltype(a)>>) {
                        const bool na = std::isnan(a), nb = std::isnan(b);
                        if (na || nb) return na != nb ? (largest ? na : nb) : i < j;
                    }
                    if (largest ? a > b : a < b) return true;
                    if (largest ? b > a : b < a) return false;
                    return i < j;
                };
                if (k < sp.len) std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), before);
                std::sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), before);
                for (std::size_t j = 0; j < k; ++j) {
                    auto o = (p * k + j) * sp.inner + q;
                    ov[o] = s[pos(order[j])];
                    oi[o] = static_cast<std::int64_t>(order[j]);
                }
            }
    }, op_name);
    return argument::make_tuple({values, indices});
}
}  // namespace

shape topk::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    if (k < 0) throw_error(error_code::shape, name() + ": negative k " + std::to_string(k));
    return topk_shapes(in[0], axis, static_cast<std::size_t>(k), name());
}

argument topk::compute(const shape&, const std::vector<argument>& args) const {
    return run_topk(args[0], axis, static_cast<std::size_t>(k), largest, name());
}

shape topk_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    if (!is_integer(in[1].get_type())) throw_error(error_code::type, name() + ": k must be int64, got " + in[1].to_string());
    return topk_shapes(in[0], axis, std::nullopt, name());
}

argument topk_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    auto k = read_ints(args[1], name(), "k");
    if (k.size() != 1 || k[0] < 0) throw_error(error_code::shape, name() + ": k must be one non-negative value");
    return run_topk(args[0], axis, static_cast<std::size_t>(k[0]), largest, name());
}

std::optional<static_form> topk_dynamic::to_static(const known_inputs& kn) const {
    if (!kn.at(1)) return std::nullopt;
    auto k = read_ints(*kn[1], name(), "k");
    if (k.size() != 1) return std::nullopt;
    return static_form{topk{axis, k[0], largest, sorted}, {0}};
}

// ---- nonzero

shape nonzero::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    return shape::make_dynamic(type::int64, {dynamic_dimension{in[0].ndim(), in[0].ndim(), {}},
                                             dynamic_dimension{0, dynamic_dimension::unbounded, {}}});
}

argument nonzero::compute(const shape&, const std::vector<argument>& args) const {
    const auto& l = args[0].get_shape().lens();
    const std::size_t rank = l.size(), n = args[0].get_shape().elements();
    // The coordinates of each nonzero element, one list per dim, the coordinates stepped like
    // an odometer (RetinaNet's score masks: millions of elements a level, 90 ms a call with
    // a division per dim per element).
    std::vector<std::vector<std::int64_t>> coords(rank);
    std::size_t hits = 0;
    const argument c = args[0].contiguous();
    visit_type(c.get_shape().get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        const C* p = c.template data_as<C>();
        std::vector<std::int64_t> idx(rank, 0);
        for (std::size_t i = 0; i < n; ++i) {
            bool nonzero = false;
            if constexpr (std::is_same_v<C, std::string>) nonzero = !p[i].empty();
            else nonzero = convert<key_t<C>>(p[i]) != key_t<C>(0);
            if (nonzero) {
                ++hits;
                for (std::size_t d = 0; d < rank; ++d) coords[d].push_back(idx[d]);
            }
            for (std::size_t d = rank; d-- > 0;) {
                if (++idx[d] < static_cast<std::int64_t>(l[d])) break;
                idx[d] = 0;
            }
        }
    });
    argument r(shape(type::int64, {rank, hits}));
    auto* o = r.data_as<std::int64_t>();
    for (std::size_t d = 0; d < rank; ++d) std::copy(coords[d].begin(), coords[d].end(), o + d * hits);
    return r;
}

// ---- unique

shape unique::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    auto any = dynamic_dimension{0, dynamic_dimension::unbounded, {}};
    shape values = shape::make_dynamic(in[0].get_type(), {any});
    if (axis) {
        auto a = normalize_axis(*axis, in[0].ndim(), name());
        auto dd = in[0].to_dynamic_dims();
        dd[a] = any;
        values = shape::make_dynamic(in[0].get_type(), dd);
    }
    shape idx = shape::make_dynamic(type::int64, {any});
    return shape::tuple({values, idx, idx, idx});
}

argument unique::compute(const shape&, const std::vector<argument>& args) const {
    argument x = args[0].contiguous();
    auto lens = x.get_shape().lens();
    if (!axis) lens = {x.get_shape().elements()};
    auto a = axis ? normalize_axis(*axis, lens.size(), name()) : 0;
    auto sp = split_at(lens, a);
    const std::size_t items = sp.len;
    const std::size_t width = sp.outer * sp.inner;
    // Element j of item i, in the order numpy compares slices (axis moved to the front).
    auto element = [&](std::size_t i, std::size_t j) { return ((j / sp.inner) * sp.len + i) * sp.inner + j % sp.inner; };
    std::vector<std::size_t> order(items);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::vector<std::size_t> group_of(items);
    std::vector<std::size_t> firsts;  // first item of each group, groups in sorted order
    visit_type(x.get_shape().get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        auto v = keys_of<C>(x);
        auto less = [&](std::size_t p, std::size_t q) {
            for (std::size_t j = 0; j < width; ++j) {
                const auto& s = v[element(p, j)];
                const auto& t = v[element(q, j)];
                if (s < t) return true;
                if (t < s) return false;
            }
            return false;
        };
        std::stable_sort(order.begin(), order.end(), less);
        for (std::size_t k = 0; k < items; ++k) {
            if (k == 0 || less(order[k - 1], order[k])) firsts.push_back(order[k]);
            group_of[order[k]] = firsts.size() - 1;
        }
    });
    // Output order of the groups: sorted, or by first occurrence.
    std::vector<std::size_t> rank_of(firsts.size());
    std::vector<std::size_t> out_order(firsts.size());
    std::iota(out_order.begin(), out_order.end(), std::size_t{0});
    if (!sorted) std::sort(out_order.begin(), out_order.end(), [&](auto p, auto q) { return firsts[p] < firsts[q]; });
    for (std::size_t r = 0; r < out_order.size(); ++r) rank_of[out_order[r]] = r;
    const std::size_t n = firsts.size();
    std::vector<std::int64_t> first_idx(n), inverse(items), counts(n, 0);
    for (std::size_t r = 0; r < n; ++r) first_idx[r] = static_cast<std::int64_t>(firsts[out_order[r]]);
    for (std::size_t i = 0; i < items; ++i) {
        inverse[i] = static_cast<std::int64_t>(rank_of[group_of[i]]);
        ++counts[rank_of[group_of[i]]];
    }
    auto ol = lens;
    ol[a] = n;
    shape ys(x.get_shape().get_type(), ol);
    auto ost = split_at(ol, a);
    argument y = copy_by_index(ys, x, [&](std::size_t e) {
        std::size_t q = e % ost.inner, r = (e / ost.inner) % n, p = e / (ost.inner * n);
        return static_cast<std::int64_t>((p * sp.len + static_cast<std::size_t>(first_idx[r])) * sp.inner + q);
    });
    return argument::make_tuple({y, int64_vector(first_idx, {n}), int64_vector(inverse, {items}), int64_vector(counts, {n})});
}

// ---- compress

std::vector<std::int64_t> compress_indices(const argument& condition, std::size_t len, const std::string& op_name) {
    const auto& s = condition.get_shape();
    if (s.ndim() != 1) throw_error(error_code::shape, op_name + ": condition must be 1-D, got " + s.to_string());
    auto c = condition.to_vector<double>();
    std::vector<std::int64_t> out;
    for (std::size_t i = 0; i < c.size(); ++i) {
        if (c[i] == 0) continue;
        if (i >= len)
            throw_error(error_code::shape, op_name + ": condition selects index " + std::to_string(i) +
                                               " of a dimension of " + std::to_string(len));
        out.push_back(static_cast<std::int64_t>(i));
    }
    return out;
}

shape compress::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    if (in[1].ndim() != 1) throw_error(error_code::shape, name() + ": condition must be 1-D, got " + in[1].to_string());
    auto any = dynamic_dimension{0, dynamic_dimension::unbounded, {}};
    if (!axis) return shape::make_dynamic(in[0].get_type(), {any});
    auto a = normalize_axis(*axis, in[0].ndim(), name());
    auto dd = in[0].to_dynamic_dims();
    dd[a] = any;
    return shape::make_dynamic(in[0].get_type(), dd);
}

argument compress::compute(const shape&, const std::vector<argument>& args) const {
    argument x = args[0].contiguous();
    if (!axis) x = x.reshape(shape(x.get_shape().get_type(), {x.get_shape().elements()}));
    auto a = axis ? normalize_axis(*axis, x.get_shape().ndim(), name()) : 0;
    auto idx = compress_indices(args[1], x.get_shape().lens()[a], name());
    argument ind = int64_vector(idx, {idx.size()});
    gather g{static_cast<std::int64_t>(a)};
    return g.compute(g.compute_shape({x.get_shape(), ind.get_shape()}), {x, ind});
}

KILN_REGISTER_OP(argmax)
KILN_REGISTER_OP(argmin)
KILN_REGISTER_OP(topk)
KILN_REGISTER_OP(topk_dynamic)
KILN_REGISTER_OP(nonzero)
KILN_REGISTER_OP(unique)
KILN_REGISTER_OP(compress)

}  // namespace kiln::op
