#include "ops/tensor_slice.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <limits>

namespace kiln::op {

// ---- slice

slice::plan slice::make_plan(const std::vector<std::size_t>& in) const {
    const std::size_t rank = in.size();
    if (starts.size() != ends.size() || (!axes.empty() && axes.size() != starts.size()) ||
        (!steps.empty() && steps.size() != starts.size()))
        throw_error(error_code::shape, name() + ": starts, ends, axes and steps differ in length (" +
                                           std::to_string(starts.size()) + ", " + std::to_string(ends.size()) + ", " +
                                           std::to_string(axes.size()) + ", " + std::to_string(steps.size()) + ")");
    std::vector<std::int64_t> ax = axes;
    if (ax.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) ax.push_back(static_cast<std::int64_t>(i));
    auto norm = normalize_axes(ax, rank, name());
    plan p;
    p.first.assign(rank, 0);
    p.step.assign(rank, 1);
    p.lens = in;
    for (std::size_t k = 0; k < norm.size(); ++k) {
        auto a = norm[k];
        auto dim = static_cast<std::int64_t>(in[a]);
        std::int64_t step = steps.empty() ? 1 : steps[k];
        if (step == 0) throw_error(error_code::shape, name() + ": step 0 on axis " + std::to_string(ax[k]));
        // Steps longer than the axis select at most the start; clamping keeps the
        // arithmetic below (and the view's strides) from overflowing.
        step = std::clamp<std::int64_t>(step, -(dim + 1), dim + 1);
        std::int64_t s = starts[k], e = ends[k];
        // Huge magnitudes (INT64_MAX stands for "to the end") must not overflow.
        auto wrap = [&](std::int64_t v) { return v < 0 ? (v < -dim ? std::int64_t{-1} : v + dim) : v; };
        s = wrap(s);
        e = wrap(e);
        if (step > 0) {
            s = std::clamp<std::int64_t>(s, 0, dim);
            e = std::clamp<std::int64_t>(e, 0, dim);
        } else {
            s = std::clamp<std::int64_t>(s, 0, dim - 1);
            e = std::clamp<std::int64_t>(e, -1, dim - 1);
        }
        std::int64_t n = 0;
        if (step > 0 && e > s) n = (e - s + step - 1) / step;
        if (step < 0 && s > e) n = (s - e + (-step) - 1) / (-step);
        p.first[a] = n > 0 ? s : 0;
        p.step[a] = step;
        p.lens[a] = static_cast<std::size_t>(n);
    }
    return p;
}

shape slice::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    auto p = make_plan(in[0].lens());
    bool forward = std::all_of(p.step.begin(), p.step.end(), [](auto s) { return s > 0; });
    if (!forward) return shape(in[0].get_type(), p.lens);
    std::vector<std::size_t> strides = in[0].strides();
    for (std::size_t i = 0; i < strides.size(); ++i) strides[i] *= static_cast<std::size_t>(p.step[i]);
    return shape(in[0].get_type(), p.lens, strides);
}

std::ptrdiff_t slice::output_alias(const std::vector<shape>&) const {
    return std::all_of(steps.begin(), steps.end(), [](auto s) { return s > 0; }) ? 0 : -1;
}

argument slice::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& in = args[0].get_shape();
    auto p = make_plan(in.lens());
    bool forward = std::all_of(p.step.begin(), p.step.end(), [](auto s) { return s > 0; });
    if (forward) {
        if (out.elements() == 0) return args[0].reshape(out);
        std::size_t offset = 0;
        for (std::size_t i = 0; i < p.first.size(); ++i) offset += static_cast<std::size_t>(p.first[i]) * in.strides()[i];
        return args[0].view(out, offset * in.type_size());
    }
    // Backwards steps cannot be a view (strides are unsigned): gather element by element.
    const auto& ol = out.lens();
    std::vector<std::size_t> idx(ol.size(), 0);
    auto in_strides = shape::standard_strides(in.lens());
    return copy_by_index(out, args[0], [&](std::size_t i) {
        if (i > 0) next_index(idx, ol);
        std::int64_t k = 0;
        for (std::size_t d = 0; d < idx.size(); ++d)
            k += (p.first[d] + static_cast<std::int64_t>(idx[d]) * p.step[d]) * static_cast<std::int64_t>(in_strides[d]);
        return k;
    });
}

shape slice_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 3, 5);
    check_rank(name(), in[0], 0, 64, "data");
    for (std::size_t i = 1; i < in.size(); ++i)
        if (!is_integer(in[i].get_type()))
            throw_error(error_code::type, name() + ": input " + std::to_string(i) + " must be integer, got " +
                                              in[i].to_string());
    return unknown_dims(in[0].get_type(), in[0].ndim());
}

slice slice_dynamic::make_slice(const std::vector<argument>& a) const {
    slice s;
    s.starts = read_ints(a[1], name(), "starts");
    s.ends = read_ints(a[2], name(), "ends");
    if (a.size() > 3) s.axes = read_ints(a[3], name(), "axes");
    if (a.size() > 4) s.steps = read_ints(a[4], name(), "steps");
    return s;
}

argument slice_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    auto s = make_slice(args);
    return s.compute(s.compute_shape({args[0].get_shape()}), {args[0]});
}

std::optional<static_form> slice_dynamic::to_static(const known_inputs& k) const {
    std::vector<argument> vals{argument{}};
    for (std::size_t i = 1; i < k.size(); ++i) {
        if (!k[i]) return std::nullopt;
        vals.push_back(*k[i]);
    }
    return static_form{make_slice(vals), {0}};
}

// ---- concat

shape concat::compute_shape(const std::vector<shape>& in) const {
    if (in.empty()) throw_error(error_code::shape, name() + ": expected at least one input");
    check_same_type(name(), in);
    auto rank = in[0].ndim();
    if (rank == 0) throw_error(error_code::shape, name() + ": inputs must have rank >= 1");
    auto a = normalize_axis(axis, rank, name());
    std::vector<std::size_t> lens = in[0].lens();
    lens[a] = 0;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const auto& l = in[i].lens();
        bool ok = l.size() == rank;
        for (std::size_t d = 0; ok && d < rank; ++d) ok = d == a || l[d] == lens[d];
        if (!ok)
            throw_error(error_code::shape, name() + ": input " + std::to_string(i) + " " + in[i].to_string() +
                                               " does not match input 0 " + in[0].to_string() + " outside axis " +
                                               std::to_string(a));
        lens[a] += l[a];
    }
    return shape(in[0].get_type(), lens);
}

argument concat::compute(const shape& out, const std::vector<argument>& args) const {
    argument dst(out);
    const auto& ol = out.lens();
    auto a = normalize_axis(axis, ol.size(), name());
    std::size_t outer = 1, inner = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= ol[d];
    for (std::size_t d = a + 1; d < ol.size(); ++d) inner *= ol[d];
    const std::size_t out_row = ol[a] * inner;
    visit_bytes(out.get_type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        U* d = dst.template data_as<U>();
        std::size_t col = 0;
        for (auto& arg : args) {
            argument src = arg.contiguous();
            const U* s = src.template data_as<U>();
            const std::size_t row = src.get_shape().lens()[a] * inner;
            for (std::size_t o = 0; o < outer; ++o) std::copy(s + o * row, s + (o + 1) * row, d + o * out_row + col);
            col += row;
        }
    });
    return dst;
}

// ---- split

std::vector<std::int64_t> even_split(std::size_t len, std::size_t count) {
    if (count == 0) throw_error(error_code::shape, "split: zero outputs");
    auto part = static_cast<std::int64_t>((len + count - 1) / count);
    std::vector<std::int64_t> sizes(count, part);
    auto rest = static_cast<std::int64_t>(len) - part * static_cast<std::int64_t>(count - 1);
    sizes.back() = std::max<std::int64_t>(rest, 0);
    return sizes;
}

shape split::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 1, 64);
    auto a = normalize_axis(axis, in[0].ndim(), name());
    std::int64_t total = 0;
    for (auto s : sizes) {
        check_dim_value(s, name(), "split size");
        total += s;
    }
    auto dd = in[0].to_dynamic_dims();
    if (dd[a].is_fixed() && static_cast<std::int64_t>(dd[a].min) != total)
        throw_error(error_code::shape, name() + ": split sizes add up to " + std::to_string(total) + ", but axis " +
                                           std::to_string(a) + " of " + in[0].to_string() + " has length " +
                                           std::to_string(dd[a].min));
    std::vector<shape> parts;
    for (auto s : sizes) {
        if (in[0].dynamic()) {
            auto d = dd;
            d[a] = {static_cast<std::size_t>(s), static_cast<std::size_t>(s), {}};
            parts.push_back(shape::make_dynamic(in[0].get_type(), d));
        } else {
            auto l = in[0].lens();
            l[a] = static_cast<std::size_t>(s);
            parts.emplace_back(in[0].get_type(), l, in[0].strides());
        }
    }
    return shape::tuple(parts);
}

argument split::compute(const shape&, const std::vector<argument>& args) const {
    // Shapes come from the argument: a tuple's compile-time shape may be dynamic.
    auto out = compute_shape({args[0].get_shape()});
    const auto& in = args[0].get_shape();
    auto a = normalize_axis(axis, in.ndim(), name());
    std::vector<argument> parts;
    std::size_t start = 0;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const auto& s = out.sub_shapes()[i];
        parts.push_back(args[0].view(s, s.elements() == 0 ? 0 : start * in.strides()[a] * in.type_size()));
        start += static_cast<std::size_t>(sizes[i]);
    }
    return argument::make_tuple(parts);
}

shape split_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1, 2);
    check_rank(name(), in[0], 1, 64, "data");
    auto a = normalize_axis(axis, in[0].ndim(), name());
    std::size_t n = count;
    if (in.size() == 2) n = static_length(in[1], name(), "the split input");
    auto dd = in[0].to_dynamic_dims();
    dd[a] = {0, dynamic_dimension::unbounded, {}};
    return shape::tuple(std::vector<shape>(n, shape::make_dynamic(in[0].get_type(), dd)));
}

argument split_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    auto a = normalize_axis(axis, args[0].get_shape().ndim(), name());
    std::vector<std::int64_t> sizes = args.size() == 2 ? read_ints(args[1], name(), "split")
                                                       : even_split(args[0].get_shape().lens()[a], count);
    return split{axis, sizes}.compute(shape{}, {args[0]});
}

std::optional<static_form> split_dynamic::to_static(const known_inputs& k) const {
    if (k.size() < 2 || !k[1]) return std::nullopt;
    return static_form{split{axis, read_ints(*k[1], name(), "split")}, {0}};
}

// ---- pad

std::vector<std::int64_t> expand_pads(const std::vector<std::int64_t>& pads, const std::vector<std::int64_t>& axes,
                                      std::size_t rank, const std::string& op_name) {
    std::size_t n = axes.empty() ? rank : axes.size();
    if (pads.size() != 2 * n)
        throw_error(error_code::shape, op_name + ": expected " + std::to_string(2 * n) + " pads for " +
                                           std::to_string(n) + " axes, got " + std::to_string(pads.size()));
    for (auto p : pads) check_dim_value(p, op_name, "pad", true);
    if (axes.empty()) return pads;
    auto norm = normalize_axes(axes, rank, op_name);
    std::vector<std::int64_t> full(2 * rank, 0);
    for (std::size_t k = 0; k < n; ++k) {
        full[norm[k]] = pads[k];
        full[rank + norm[k]] = pads[n + k];
    }
    return full;
}

shape pad::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1, 2);
    check_rank(name(), in[0], 0, 64);
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
        throw_error(error_code::unsupported, name() + ": unknown mode '" + mode + "'");
    if (in.size() == 2 && (in[1].get_type() != in[0].get_type() || in[1].elements() != 1))
        throw_error(error_code::type, name() + ": the constant value must be one " +
                                          std::string(type_name(in[0].get_type())) + ", got " + in[1].to_string());
    const auto& l = in[0].lens();
    auto pads = expand_pads(this->pads, axes, l.size(), name());
    std::vector<std::size_t> lens;
    for (std::size_t i = 0; i < l.size(); ++i) {
        auto n = static_cast<std::int64_t>(l[i]) + pads[i] + pads[i + l.size()];
        if (n < 0) throw_error(error_code::shape, name() + ": pads crop axis " + std::to_string(i) + " below zero");
        if (mode != "constant" && l[i] == 0 && n > 0)
            throw_error(error_code::shape, name() + ": cannot " + mode + "-pad an empty axis " + std::to_string(i));
        lens.push_back(static_cast<std::size_t>(n));
    }
    return shape(in[0].get_type(), lens);
}

argument pad::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& il = args[0].get_shape().lens();
    const auto& ol = out.lens();
    const std::size_t rank = il.size();
    auto pads = expand_pads(this->pads, axes, rank, name());
    auto in_strides = shape::standard_strides(il);
    // Maps an output coordinate on axis d to an input coordinate, or -1 for the fill value.
    auto source = [&](std::size_t d, std::int64_t o) -> std::int64_t {
        auto n = static_cast<std::int64_t>(il[d]);
        std::int64_t i = o - pads[d];
        if (i >= 0 && i < n) return i;
        if (mode == "constant") return -1;
        if (mode == "edge") return std::clamp<std::int64_t>(i, 0, n - 1);
        if (mode == "wrap") return ((i % n) + n) % n;
        if (n == 1) return 0;
        std::int64_t m = 2 * (n - 1);  // reflect: mirror without repeating the edge
        std::int64_t j = ((i % m) + m) % m;
        return j < n ? j : m - j;
    };
    // Each axis's output coordinate -> input offset (or -1), worked out once per axis rather
    // than per element: a big reflect pad took 57 ns an element with the mode compared per dim.
    std::vector<std::vector<std::int64_t>> offset(rank);
    for (std::size_t d = 0; d < rank; ++d) {
        offset[d].resize(ol[d]);
        for (std::size_t o = 0; o < ol[d]; ++o) {
            auto src = source(d, static_cast<std::int64_t>(o));
            offset[d][o] = src < 0 ? -1 : src * static_cast<std::int64_t>(in_strides[d]);
        }
    }
    std::vector<std::size_t> idx(rank, 0);
    argument fill_value = args.size() > 1 ? args[1].contiguous() : argument{};
    return copy_by_index(out, args[0], [&](std::size_t i) -> std::int64_t {
        if (i > 0) next_index(idx, ol);
        std::int64_t k = 0;
        for (std::size_t d = 0; d < rank; ++d) {
            const auto o = offset[d][idx[d]];
            if (o < 0) return -1;
            k += o;
        }
        return k;
    }, args.size() > 1 ? &fill_value : nullptr);
}

shape pad_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2 + (has_value ? 1 : 0) + (has_axes ? 1 : 0));
    check_rank(name(), in[0], 0, 64, "data");
    if (!is_integer(in[1].get_type()))
        throw_error(error_code::type, name() + ": pads must be int64, got " + in[1].to_string());
    return unknown_dims(in[0].get_type(), in[0].ndim());
}

argument pad_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    pad p{mode, read_ints(args[1], name(), "pads"), {}};
    if (has_axes) p.axes = read_ints(args.back(), name(), "axes");
    std::vector<argument> in{args[0]};
    if (has_value) in.push_back(args[2]);
    std::vector<shape> shapes;
    for (auto& a : in) shapes.push_back(a.get_shape());
    return p.compute(p.compute_shape(shapes), in);
}

std::optional<static_form> pad_dynamic::to_static(const known_inputs& k) const {
    if (!k.at(1) || (has_axes && !k.back())) return std::nullopt;
    pad p{mode, read_ints(*k[1], name(), "pads"), {}};
    if (has_axes) p.axes = read_ints(*k.back(), name(), "axes");
    std::vector<std::size_t> keep{0};
    if (has_value) keep.push_back(2);
    return static_form{p, keep};
}

// ---- tile

shape tile::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    const auto& l = in[0].lens();
    if (repeats.size() != l.size())
        throw_error(error_code::shape, name() + ": " + std::to_string(repeats.size()) + " repeats for " +
                                           in[0].to_string());
    std::vector<std::size_t> lens;
    for (std::size_t i = 0; i < l.size(); ++i) {
        check_dim_value(repeats[i], name(), "repeat");
        if (l[i] != 0 && static_cast<std::size_t>(repeats[i]) > static_cast<std::size_t>(max_dim) / l[i])
            throw_error(error_code::shape, name() + ": repeats make axis " + std::to_string(i) + " too long");
        lens.push_back(l[i] * static_cast<std::size_t>(repeats[i]));
    }
    return shape(in[0].get_type(), lens);
}

argument tile::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& il = args[0].get_shape().lens();
    const auto& ol = out.lens();
    auto in_strides = shape::standard_strides(il);
    std::vector<std::size_t> idx(ol.size(), 0);
    return copy_by_index(out, args[0], [&](std::size_t i) {
        if (i > 0) next_index(idx, ol);
        std::int64_t k = 0;
        for (std::size_t d = 0; d < idx.size(); ++d) k += static_cast<std::int64_t>((idx[d] % il[d]) * in_strides[d]);
        return k;
    });
}

shape tile_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 0, 64, "data");
    if (!is_integer(in[1].get_type()))
        throw_error(error_code::type, name() + ": repeats must be int64, got " + in[1].to_string());
    return unknown_dims(in[0].get_type(), in[0].ndim());
}

argument tile_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    tile t{read_ints(args[1], name(), "repeats")};
    return t.compute(t.compute_shape({args[0].get_shape()}), {args[0]});
}

std::optional<static_form> tile_dynamic::to_static(const known_inputs& k) const {
    if (!k.at(1)) return std::nullopt;
    return static_form{tile{read_ints(*k[1], name(), "repeats")}, {0}};
}

KILN_REGISTER_OP(slice)
KILN_REGISTER_OP(slice_dynamic)
KILN_REGISTER_OP(concat)
KILN_REGISTER_OP(split)
KILN_REGISTER_OP(split_dynamic)
KILN_REGISTER_OP(pad)
KILN_REGISTER_OP(pad_dynamic)
KILN_REGISTER_OP(tile)
KILN_REGISTER_OP(tile_dynamic)

}  // namespace kiln::op
