#include "ops/tensor_gather.hpp"

#include "ops/nn_common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>

namespace kiln::op {

std::int64_t checked_index(std::int64_t v, std::size_t dim, const std::string& op_name) {
    auto d = static_cast<std::int64_t>(dim);
    if (v < -d || v >= d)
        throw_error(error_code::runtime, op_name + ": index " + std::to_string(v) + " is out of range for a dimension of " +
                                             std::to_string(dim));
    return v < 0 ? v + d : v;
}

namespace {

void check_indices_type(const std::string& op_name, const shape& s) {
    if (s.get_type() != type::int32 && s.get_type() != type::int64)
        throw_error(error_code::type, op_name + ": indices must be int32 or int64, got " + s.to_string());
}

std::size_t dot(const std::vector<std::size_t>& idx, const std::vector<std::size_t>& strides) {
    std::size_t k = 0;
    for (std::size_t i = 0; i < idx.size(); ++i) k += idx[i] * strides[i];
    return k;
}

// out[o] = reduce(out[o], updates[u]) for each (o, u) that walk(visit) visits, in order
// (later writes win for "none"). The offsets are visited, not stored: Mask R-CNN's
// scatters write 12.5M elements a call, and a vector of pairs was 200 MB of traffic.
template <class Walk>
void scatter_apply(const argument& out, const argument& updates, Walk walk, const std::string& reduction,
                   const std::string& op_name) {
    if (reduction == "none") {
        visit_bytes(out.get_shape().get_type(), [&](auto tag) {
            using U = typename decltype(tag)::type;
            U* o = out.template data_as<U>();
            const U* u = updates.template data_as<U>();
            walk([&](std::size_t a, std::size_t b) { o[a] = u[b]; });
        });
        return;
    }
    enum class kind { add, mul, max, min };
    kind k = kind::add;
    if (reduction == "mul") k = kind::mul;
    else if (reduction == "max") k = kind::max;
    else if (reduction == "min") k = kind::min;
    else if (reduction != "add")
        throw_error(error_code::unsupported, op_name + ": unknown reduction '" + reduction + "'");
    visit_numeric(out.get_shape().get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        using T = compute_t<C>;
        C* o = out.template data_as<C>();
        const C* u = updates.template data_as<C>();
        walk([&](std::size_t a, std::size_t b) {
            if constexpr (std::is_same_v<C, bool>) {
                bool x = o[a], y = u[b];
                o[a] = k == kind::add || k == kind::max ? (x || y) : (x && y);
            } else {
                const T x = convert<T>(o[a]), y = convert<T>(u[b]);
                o[a] = convert<C>(k == kind::add ? x + y : k == kind::mul ? x * y : k == kind::max ? std::max(x, y) : std::min(x, y));
            }
        });
    }, op_name);
}

}  // namespace

// ---- gather

shape gather::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 1, 64, "data");
    check_indices_type(name(), in[1]);
    auto a = normalize_axis(axis, in[0].ndim(), name());
    const auto& dl = in[0].lens();
    std::vector<std::size_t> lens(dl.begin(), dl.begin() + static_cast<std::ptrdiff_t>(a));
    for (auto d : in[1].lens()) lens.push_back(d);
    lens.insert(lens.end(), dl.begin() + static_cast<std::ptrdiff_t>(a) + 1, dl.end());
    return shape(in[0].get_type(), lens);
}

argument gather::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& dl = args[0].get_shape().lens();
    auto a = normalize_axis(axis, dl.size(), name());
    auto ind = args[1].to_vector<std::int64_t>();
    for (auto& v : ind) v = checked_index(v, dl[a], name());
    std::size_t inner = 1;
    for (std::size_t d = a + 1; d < dl.size(); ++d) inner *= dl[d];
    const std::size_t n_ind = ind.size();
    const std::size_t axis_len = dl[a];
    std::size_t outer = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= dl[d];
    // Each (outer, index) pair selects one contiguous block of `inner` elements: copy blocks,
    // not elements (an embedding lookup is a row copy per token).
    argument src = args[0].contiguous();
    argument dst(out.as_standard());
    visit_bytes(out.get_type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        const U* s = src.template data_as<U>();
        U* d = dst.template data_as<U>();
        for (std::size_t o = 0; o < outer; ++o)
            for (std::size_t j = 0; j < n_ind; ++j) {
                const U* from = s + (o * axis_len + static_cast<std::size_t>(ind[j])) * inner;
                std::copy(from, from + inner, d + (o * n_ind + j) * inner);
            }
    });
    return dst;
}

// ---- gather_elements

shape gather_elements::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 1, 64, "data");
    check_indices_type(name(), in[1]);
    if (in[1].ndim() != in[0].ndim())
        throw_error(error_code::shape, name() + ": indices " + in[1].to_string() + " and data " + in[0].to_string() +
                                           " differ in rank");
    normalize_axis(axis, in[0].ndim(), name());
    return shape(in[0].get_type(), in[1].lens());
}

argument gather_elements::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& dl = args[0].get_shape().lens();
    auto a = normalize_axis(axis, dl.size(), name());
    auto ind = args[1].to_vector<std::int64_t>();
    auto ds = shape::standard_strides(dl);
    const auto& il = out.lens();
    std::vector<std::size_t> idx(il.size(), 0);
    return copy_by_index(out, args[0], [&](std::size_t i) {
        if (i > 0) next_index(idx, il);
        auto t = idx;
        t[a] = static_cast<std::size_t>(checked_index(ind[i], dl[a], name()));
        for (std::size_t d = 0; d < t.size(); ++d)
            if (t[d] >= dl[d]) throw_error(error_code::shape, name() + ": indices exceed data outside the axis");
        return static_cast<std::int64_t>(dot(t, ds));
    });
}

// ---- gather_nd

shape gather_nd::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 1, 64, "data");
    check_rank(name(), in[1], 1, 64, "indices");
    check_indices_type(name(), in[1]);
    const auto& dl = in[0].lens();
    const auto& il = in[1].lens();
    auto b = static_cast<std::size_t>(batch_dims);
    auto k = il.back();
    if (batch_dims < 0 || b >= std::min(dl.size(), il.size()) || b + k > dl.size())
        throw_error(error_code::shape, name() + ": batch_dims " + std::to_string(batch_dims) + " and index depth " +
                                           std::to_string(k) + " do not fit data " + in[0].to_string() +
                                           " and indices " + in[1].to_string());
    for (std::size_t i = 0; i < b; ++i)
        if (dl[i] != il[i])
            throw_error(error_code::shape, name() + ": batch dimension " + std::to_string(i) + " differs between data " +
                                               in[0].to_string() + " and indices " + in[1].to_string());
    std::vector<std::size_t> lens(il.begin(), il.end() - 1);
    lens.insert(lens.end(), dl.begin() + static_cast<std::ptrdiff_t>(b + k), dl.end());
    return shape(in[0].get_type(), lens);
}

argument gather_nd::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& dl = args[0].get_shape().lens();
    const auto& il = args[1].get_shape().lens();
    const auto ind = read_as<std::int64_t>(args[1]);
    auto b = static_cast<std::size_t>(batch_dims);
    auto k = il.back();
    auto ds = shape::standard_strides(dl);
    std::size_t slice = 1;
    for (std::size_t d = b + k; d < dl.size(); ++d) slice *= dl[d];
    std::size_t per_batch = 1;  // index tuples per batch entry
    for (std::size_t d = b; d + 1 < il.size(); ++d) per_batch *= il[d];
    std::size_t tuples = 1;
    for (std::size_t d = 0; d + 1 < il.size(); ++d) tuples *= il[d];
    argument src = args[0].contiguous();
    argument dst(out.as_standard());
    // One offset per index tuple, then its slice copied as a run (RetinaNet gathers millions
    // of single scores a level: an offset worked out per element was 50 ms a call).
    visit_bytes(out.get_type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        const U* from = src.template data_as<U>();
        U* to = dst.template data_as<U>();
        for (std::size_t t = 0; t < tuples; ++t) {
            // The batch entry's own offset: its batch coordinates, row-major over dl[0..b).
            std::size_t offset = 0, rem = t / std::max<std::size_t>(per_batch, 1);
            for (std::size_t d = b; d-- > 0;) {
                offset += (rem % dl[d]) * ds[d];
                rem /= dl[d];
            }
            for (std::size_t j = 0; j < k; ++j)
                offset += static_cast<std::size_t>(checked_index(ind[t * k + j], dl[b + j], name())) * ds[b + j];
            std::copy(from + offset, from + offset + slice, to + t * slice);
        }
    });
    return dst;
}

// ---- scatter_elements

shape scatter_elements::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 3);
    check_rank(name(), in[0], 1, 64, "data");
    check_indices_type(name(), in[1]);
    if (in[2].get_type() != in[0].get_type())
        throw_error(error_code::type, name() + ": updates " + in[2].to_string() + " differ in type from data " +
                                          in[0].to_string());
    if (in[1].lens() != in[2].lens() || in[1].ndim() != in[0].ndim())
        throw_error(error_code::shape, name() + ": indices " + in[1].to_string() + " and updates " + in[2].to_string() +
                                           " must have one shape, of data's rank " + std::to_string(in[0].ndim()));
    normalize_axis(axis, in[0].ndim(), name());
    return in[0].as_standard();
}

argument scatter_elements::compute(const shape& out, const std::vector<argument>& args) const {
    argument result = args[0].copy();
    const auto& dl = out.lens();
    auto a = normalize_axis(axis, dl.size(), name());
    // int64 indices are read in place with their strides: torchvision's RoI poolers expand one
    // level index per RoI over [R, 256, 7, 7] (a broadcast view), and materializing it cost
    // more than the scatter.
    const bool in_place = args[1].get_shape().get_type() == type::int64;
    compute_buffer<std::int64_t> materialized;
    if (!in_place) materialized = read_as<std::int64_t>(args[1]);
    const std::int64_t* ind = in_place ? args[1].data_as<std::int64_t>() : materialized.data();
    const auto& il = args[1].get_shape().lens();
    const auto is = in_place ? args[1].get_shape().strides() : shape::standard_strides(il);
    const std::size_t count = args[1].get_shape().elements();
    argument upd = args[2].contiguous();
    auto ds = shape::standard_strides(dl);
    for (std::size_t d = 0; d < il.size(); ++d)
        if (d != a && il[d] > dl[d])
            throw_error(error_code::shape, name() + ": indices exceed data outside the axis");
    // Each update's target offset, walked like an odometer: `base` holds every coordinate's
    // part but the axis', `at` the index's offset, so an element costs an add, not a vector
    // (Mask R-CNN scatters 12.5M elements a call: 116 ms with a coordinate vector per element).
    // An index out of range throws part way; `result` is a copy, so nothing the caller sees
    // was written.
    auto walk = [&](auto&& visit) {
        if (count == 0) return;
        // Rows along the last dim, the odometer over the dims before it.
        const std::size_t last = il.size() - 1, row = il[last], step = last == a ? 0 : 1, istep = is[last];
        const auto axis_len = static_cast<std::int64_t>(dl[a]);
        // checked_index's bounds test inline: it throws (naming the index given) only when out of range.
        auto target = [&](std::int64_t v) {
            const std::int64_t t = v < 0 ? v + axis_len : v;
            if (t < 0 || t >= axis_len) (void)checked_index(v, dl[a], name());
            return static_cast<std::size_t>(t) * ds[a];
        };
        std::vector<std::size_t> idx(last, 0);
        std::size_t base = 0, at = 0;
        for (std::size_t i = 0; i < count; i += row) {
            if (i > 0) {
                for (std::size_t d = last; d-- > 0;) {
                    ++idx[d];
                    at += is[d];
                    if (d != a) base += ds[d];
                    if (idx[d] < il[d]) break;
                    at -= idx[d] * is[d];
                    if (d != a) base -= idx[d] * ds[d];
                    idx[d] = 0;
                }
            }
            if (istep == 0) {  // one index for the whole row
                const std::size_t t = base + target(ind[at]);
                for (std::size_t j = 0; j < row; ++j) visit(t + j * step, i + j);
            } else {
                for (std::size_t j = 0; j < row; ++j) visit(base + target(ind[at + j * istep]) + j * step, i + j);
            }
        }
    };
    scatter_apply(result, upd, walk, reduction, name());
    return result;
}

// ---- scatter_nd

shape scatter_nd::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 3);
    check_rank(name(), in[0], 1, 64, "data");
    check_rank(name(), in[1], 1, 64, "indices");
    check_indices_type(name(), in[1]);
    const auto& dl = in[0].lens();
    const auto& il = in[1].lens();
    auto k = il.back();
    if (k > dl.size())
        throw_error(error_code::shape, name() + ": index depth " + std::to_string(k) + " exceeds the rank of data " +
                                           in[0].to_string());
    std::vector<std::size_t> expect(il.begin(), il.end() - 1);
    expect.insert(expect.end(), dl.begin() + static_cast<std::ptrdiff_t>(k), dl.end());
    if (in[2].lens() != expect || in[2].get_type() != in[0].get_type())
        throw_error(error_code::shape, name() + ": updates " + in[2].to_string() + " must be " +
                                           shape(in[0].get_type(), expect).to_string());
    return in[0].as_standard();
}

argument scatter_nd::compute(const shape& out, const std::vector<argument>& args) const {
    argument result = args[0].copy();
    const auto& dl = out.lens();
    const auto& il = args[1].get_shape().lens();
    auto ind = args[1].to_vector<std::int64_t>();
    argument upd = args[2].contiguous();
    auto k = il.back();
    auto ds = shape::standard_strides(dl);
    std::size_t slice = 1;
    for (std::size_t d = k; d < dl.size(); ++d) slice *= dl[d];
    std::size_t tuples = 1;
    for (std::size_t d = 0; d + 1 < il.size(); ++d) tuples *= il[d];
    auto walk = [&](auto&& visit) {
        for (std::size_t t = 0; t < tuples; ++t) {
            std::size_t offset = 0;
            for (std::size_t j = 0; j < k; ++j)
                offset += static_cast<std::size_t>(checked_index(ind[t * k + j], dl[j], name())) * ds[j];
            for (std::size_t e = 0; e < slice; ++e) visit(offset + e, t * slice + e);
        }
    };
    scatter_apply(result, upd, walk, reduction, name());
    return result;
}

// ---- tensor_scatter

shape tensor_scatter::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2, 3);
    check_rank(name(), in[0], 2, 64, "past_cache");
    if (mode != "linear" && mode != "circular")
        throw_error(error_code::unsupported, name() + ": unknown mode '" + mode + "'");
    auto a = normalize_axis(axis, in[0].ndim(), name());
    if (a == 0) throw_error(error_code::shape, name() + ": axis cannot be the batch axis");
    const auto& pl = in[0].lens();
    const auto& ul = in[1].lens();
    bool ok = ul.size() == pl.size() && in[1].get_type() == in[0].get_type();
    for (std::size_t d = 0; ok && d < pl.size(); ++d) ok = d == a ? ul[d] <= pl[d] : ul[d] == pl[d];
    if (!ok)
        throw_error(error_code::shape, name() + ": update " + in[1].to_string() + " does not fit past_cache " +
                                           in[0].to_string() + " (only axis " + std::to_string(a) + " may be shorter)");
    if (in.size() == 3 && (in[2].ndim() != 1 || in[2].lens()[0] != pl[0] || !is_integer(in[2].get_type())))
        throw_error(error_code::shape, name() + ": write_indices must be an integer vector of the batch size, got " +
                                           in[2].to_string());
    return in[0].as_standard();
}

argument tensor_scatter::compute(const shape& out, const std::vector<argument>& args) const {
    argument result = args[0].copy();
    const auto& pl = out.lens();
    const auto& ul = args[1].get_shape().lens();
    auto a = normalize_axis(axis, pl.size(), name());
    std::vector<std::int64_t> writes(pl[0], 0);
    if (args.size() == 3) writes = args[2].to_vector<std::int64_t>();
    argument upd = args[1].contiguous();
    auto ps = shape::standard_strides(pl);
    auto us = shape::standard_strides(ul);
    std::size_t inner = ps[a];  // elements after the sequence axis, copied as one run
    std::vector<std::size_t> prefix(pl.begin(), pl.begin() + static_cast<std::ptrdiff_t>(a));
    std::size_t outer = 1;
    for (auto d : prefix) outer *= d;
    auto walk = [&](auto&& visit) {
        std::vector<std::size_t> idx(prefix.size(), 0);
        for (std::size_t p = 0; p < outer; ++p) {
            if (p > 0) next_index(idx, prefix);
            std::int64_t w = writes[idx[0]];
            std::size_t pbase = 0, ubase = 0;
            for (std::size_t d = 0; d < idx.size(); ++d) {
                pbase += idx[d] * ps[d];
                ubase += idx[d] * us[d];
            }
            for (std::size_t s = 0; s < ul[a]; ++s) {
                std::int64_t pos = w + static_cast<std::int64_t>(s);
                if (mode == "circular")
                    pos = ((pos % static_cast<std::int64_t>(pl[a])) + static_cast<std::int64_t>(pl[a])) %
                          static_cast<std::int64_t>(pl[a]);
                if (pos < 0 || pos >= static_cast<std::int64_t>(pl[a]))
                    throw_error(error_code::runtime, name() + ": write index " + std::to_string(pos) +
                                                         " is past the cache length " + std::to_string(pl[a]));
                for (std::size_t e = 0; e < inner; ++e)
                    visit(pbase + static_cast<std::size_t>(pos) * ps[a] + e, ubase + s * us[a] + e);
            }
        }
    };
    scatter_apply(result, upd, walk, "none", name());
    return result;
}

KILN_REGISTER_OP(gather)
KILN_REGISTER_OP(gather_elements)
KILN_REGISTER_OP(gather_nd)
KILN_REGISTER_OP(scatter_elements)
KILN_REGISTER_OP(scatter_nd)
KILN_REGISTER_OP(tensor_scatter)

}  // namespace kiln::op
