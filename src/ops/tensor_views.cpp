#include "ops/tensor_views.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <numeric>

namespace kiln::op {

namespace {

std::string dims_text(const std::vector<std::int64_t>& d) {
    std::string s = "{";
    for (std::size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "}";
}

// A view of `in` with `lens` in row-major order: only valid for standard inputs.
shape standard_view(const shape& in, std::vector<std::size_t> lens) { return shape(in.get_type(), std::move(lens)); }

argument view_or_copy(const shape& out, const argument& a) {
    if (a.get_shape().standard()) return a.reshape(out);
    return a.contiguous().reshape(out);
}

}  // namespace

std::vector<std::size_t> reshape_lens(const std::vector<std::size_t>& in, const std::vector<std::int64_t>& dims,
                                      bool allowzero, const std::string& op_name) {
    std::size_t total = 1;
    for (auto d : in) total *= d;
    std::vector<std::size_t> out(dims.size(), 1);
    std::ptrdiff_t infer = -1;
    std::size_t known = 1;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        auto d = dims[i];
        if (d == -1) {
            if (infer >= 0)
                throw_error(error_code::shape, op_name + ": shape " + dims_text(dims) + " has more than one -1");
            infer = static_cast<std::ptrdiff_t>(i);
            continue;
        }
        if (d < -1) throw_error(error_code::shape, op_name + ": shape " + dims_text(dims) + " has a negative dimension");
        check_dim_value(d, op_name, "dimension");
        if (d == 0 && !allowzero) {
            if (i >= in.size())
                throw_error(error_code::shape, op_name + ": shape " + dims_text(dims) + " copies dimension " +
                                                   std::to_string(i) + " of a rank-" + std::to_string(in.size()) +
                                                   " input");
            out[i] = in[i];
        } else {
            out[i] = static_cast<std::size_t>(d);
        }
        if (known != 0 && out[i] > static_cast<std::size_t>(max_dim) / known)
            throw_error(error_code::shape, op_name + ": shape " + dims_text(dims) + " has too many elements");
        known *= out[i];
    }
    if (infer >= 0) {
        if (known == 0) {
            if (total != 0)
                throw_error(error_code::shape, op_name + ": cannot infer -1 in " + dims_text(dims) +
                                                   " next to a zero dimension");
            out[infer] = 0;
        } else {
            if (total % known != 0)
                throw_error(error_code::shape, op_name + ": cannot reshape " + std::to_string(total) +
                                                   " elements to " + dims_text(dims));
            out[infer] = total / known;
        }
        known *= out[infer];
    }
    if (known != total) {
        // Say what the zeros became: a 0 that copies an empty input's dim reads like a bug
        // of ours otherwise ("0 elements to {0, 32}" where the target is really {5, 32}).
        std::string what = dims_text(dims);
        if (!allowzero && std::find(dims.begin(), dims.end(), std::int64_t{0}) != dims.end()) {
            std::vector<std::int64_t> resolved(out.begin(), out.end());
            what += ", that is " + dims_text(resolved) + " (a 0 copies the input's dimension without allowzero)";
        }
        std::vector<std::int64_t> from(in.begin(), in.end());
        throw_error(error_code::shape, op_name + ": cannot reshape " + dims_text(from) + " (" + std::to_string(total) +
                                           " elements) to " + what);
    }
    return out;
}

// ---- reshape

shape reshape::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    return standard_view(in[0], reshape_lens(in[0].lens(), dims, allowzero, name()));
}

argument reshape::compute(const shape& out, const std::vector<argument>& args) const {
    return view_or_copy(out, args[0]);
}

std::ptrdiff_t reshape::output_alias(const std::vector<shape>& in) const {
    return in.at(0).dynamic() || in.at(0).standard() ? 0 : -1;
}

shape reshape_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 0, 64, "data");
    if (!is_integer(in[1].get_type()))
        throw_error(error_code::type, name() + ": shape must be int64, got " + in[1].to_string());
    return unknown_dims(in[0].get_type(), static_length(in[1], name(), "the shape input"));
}

argument reshape_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    reshape r{read_ints(args[1], name(), "shape"), allowzero};
    return view_or_copy(r.compute_shape({args[0].get_shape()}), args[0]);
}

std::optional<static_form> reshape_dynamic::to_static(const known_inputs& k) const {
    if (!k.at(1)) return std::nullopt;
    return static_form{reshape{read_ints(*k[1], name(), "shape"), allowzero}, {0}};
}

// ---- flatten

shape flatten::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    const auto& l = in[0].lens();
    auto r = static_cast<std::int64_t>(l.size());
    if (axis < -r || axis > r)
        throw_error(error_code::shape, name() + ": axis " + std::to_string(axis) + " is out of range for rank " +
                                           std::to_string(r));
    auto a = static_cast<std::size_t>(axis < 0 ? axis + r : axis);
    std::size_t outer = 1, inner = 1;
    for (std::size_t i = 0; i < l.size(); ++i) (i < a ? outer : inner) *= l[i];
    return standard_view(in[0], {outer, inner});
}

argument flatten::compute(const shape& out, const std::vector<argument>& args) const {
    return view_or_copy(out, args[0]);
}

std::ptrdiff_t flatten::output_alias(const std::vector<shape>& in) const {
    return in.at(0).dynamic() || in.at(0).standard() ? 0 : -1;
}

// ---- squeeze / unsqueeze

shape squeeze::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    const auto& l = in[0].lens();
    const auto& s = in[0].strides();
    auto ax = normalize_axes(axes, l.size(), name());
    std::vector<std::size_t> lens, strides;
    for (std::size_t i = 0; i < l.size(); ++i) {
        bool listed = std::find(ax.begin(), ax.end(), i) != ax.end();
        if (listed && l[i] != 1)
            throw_error(error_code::shape, name() + ": dimension " + std::to_string(i) + " of " + in[0].to_string() +
                                               " has length " + std::to_string(l[i]) + ", not 1");
        if (listed || (ax.empty() && l[i] == 1)) continue;
        lens.push_back(l[i]);
        strides.push_back(s[i]);
    }
    return shape(in[0].get_type(), lens, strides);
}

shape unsqueeze::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    const auto& l = in[0].lens();
    const auto& s = in[0].strides();
    auto rank = l.size() + axes.size();
    auto ax = normalize_axes(axes, rank, name());
    std::vector<std::size_t> lens, strides;
    std::size_t k = 0;
    for (std::size_t i = 0; i < rank; ++i) {
        if (std::find(ax.begin(), ax.end(), i) != ax.end()) {
            lens.push_back(1);
            strides.push_back(0);  // fixed below to keep standard inputs standard
        } else {
            lens.push_back(l[k]);
            strides.push_back(s[k]);
            ++k;
        }
    }
    // Give each new dimension the stride a row-major layout would have.
    std::size_t next = 1;
    for (std::size_t i = rank; i-- > 0;) {
        if (std::find(ax.begin(), ax.end(), i) != ax.end()) strides[i] = next;
        else next = strides[i] * std::max<std::size_t>(lens[i], 1);
    }
    return shape(in[0].get_type(), lens, strides);
}

shape squeeze_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 0, 64, "data");
    if (!is_integer(in[1].get_type()))
        throw_error(error_code::type, name() + ": axes must be int64, got " + in[1].to_string());
    auto n = static_length(in[1], name(), "the axes input");
    auto r = in[0].ndim();
    if (!unsqueeze && n > r)
        throw_error(error_code::shape, name() + ": " + std::to_string(n) + " axes for a rank-" + std::to_string(r) +
                                           " input");
    return unknown_dims(in[0].get_type(), unsqueeze ? r + n : r - n);
}

argument squeeze_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    auto ax = read_ints(args[1], name(), "axes");
    shape out = unsqueeze ? op::unsqueeze{ax}.compute_shape({args[0].get_shape()})
                          : squeeze{ax}.compute_shape({args[0].get_shape()});
    return args[0].reshape(out);
}

std::optional<static_form> squeeze_dynamic::to_static(const known_inputs& k) const {
    if (!k.at(1)) return std::nullopt;
    auto ax = read_ints(*k[1], name(), "axes");
    if (unsqueeze) return static_form{op::unsqueeze{ax}, {0}};
    return static_form{squeeze{ax}, {0}};
}

// ---- transpose

shape transpose::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    const auto& l = in[0].lens();
    const auto& s = in[0].strides();
    std::vector<std::int64_t> p = perm;
    if (p.empty()) {
        p.resize(l.size());
        for (std::size_t i = 0; i < l.size(); ++i) p[i] = static_cast<std::int64_t>(l.size() - 1 - i);
    }
    if (p.size() != l.size())
        throw_error(error_code::shape, name() + ": perm " + dims_text(p) + " does not match rank " +
                                           std::to_string(l.size()) + " of " + in[0].to_string());
    auto ax = normalize_axes(p, l.size(), name());
    std::vector<std::size_t> lens, strides;
    for (auto a : ax) {
        lens.push_back(l[a]);
        strides.push_back(s[a]);
    }
    return shape(in[0].get_type(), lens, strides);
}

// ---- broadcast / expand

shape broadcast::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    std::vector<std::size_t> target;
    for (auto d : dims) {
        if (d < 0) throw_error(error_code::shape, name() + ": negative dimension in " + dims_text(dims));
        target.push_back(static_cast<std::size_t>(d));
    }
    auto lens = broadcast_lens({in[0].lens(), target}, name());
    return broadcast_to(in[0], lens);
}

shape expand_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    check_rank(name(), in[0], 0, 64, "data");
    if (!is_integer(in[1].get_type()))
        throw_error(error_code::type, name() + ": shape must be int64, got " + in[1].to_string());
    auto n = static_length(in[1], name(), "the shape input");
    auto dd = in[0].to_dynamic_dims();
    auto rank = std::max(n, dd.size());
    std::vector<dynamic_dimension> out(rank, dynamic_dimension{0, dynamic_dimension::unbounded, {}});
    // Input dimensions other than 1 fix the output dimension (broadcasting cannot change them).
    for (std::size_t i = 0; i < dd.size(); ++i)
        if (dd[i].is_fixed() && dd[i].min != 1) out[rank - dd.size() + i] = dd[i];
    if (rank == 0) return shape(in[0].get_type());
    return shape::make_dynamic(in[0].get_type(), out);
}

argument expand_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    broadcast b{read_ints(args[1], name(), "shape")};
    return args[0].reshape(b.compute_shape({args[0].get_shape()}));
}

std::optional<static_form> expand_dynamic::to_static(const known_inputs& k) const {
    if (!k.at(1)) return std::nullopt;
    return static_form{broadcast{read_ints(*k[1], name(), "shape")}, {0}};
}

// ---- shape_of / size_of

std::pair<std::size_t, std::size_t> shape_of::range(std::size_t rank) const {
    auto r = static_cast<std::int64_t>(rank);
    auto clamp = [&](std::int64_t v) { return std::clamp<std::int64_t>(v < 0 ? v + r : v, 0, r); };
    auto b = clamp(start);
    auto e = clamp(end.value_or(r));
    if (e < b) e = b;
    return {static_cast<std::size_t>(b), static_cast<std::size_t>(e)};
}

std::optional<std::vector<std::int64_t>> shape_of::known_dims(const shape& in) const {
    if (!in.is_tensor()) return std::nullopt;
    auto dd = in.to_dynamic_dims();
    auto [b, e] = range(dd.size());
    std::vector<std::int64_t> out;
    for (auto i = b; i < e; ++i) {
        if (!dd[i].is_fixed()) return std::nullopt;
        out.push_back(static_cast<std::int64_t>(dd[i].min));
    }
    return out;
}

shape shape_of::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    auto [b, e] = range(in[0].ndim());
    return shape(type::int64, {e - b});
}

shape shape_of::compute_shape(const std::vector<shape>& in, const known_inputs&) const {
    auto s = compute_shape(in);
    if (in[0].dynamic() || s.elements() == 0 || s.elements() > shape::max_valued_elements) return s;
    auto [b, e] = range(in[0].ndim());
    std::vector<std::string> values;
    for (auto i = b; i < e; ++i) values.push_back(std::to_string(in[0].lens()[i]));
    return s.with_values(std::move(values));
}

argument shape_of::compute(const shape&, const std::vector<argument>& args) const {
    const auto& l = args[0].get_shape().lens();
    auto [b, e] = range(l.size());
    std::vector<std::int64_t> v(l.begin() + static_cast<std::ptrdiff_t>(b), l.begin() + static_cast<std::ptrdiff_t>(e));
    return literal(shape(type::int64, {v.size()}), v).get_argument();
}

shape size_of::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 0, 64);
    return shape(type::int64);
}

argument size_of::compute(const shape&, const std::vector<argument>& args) const {
    return literal(static_cast<std::int64_t>(args[0].get_shape().elements())).get_argument();
}

KILN_REGISTER_OP(reshape)
KILN_REGISTER_OP(reshape_dynamic)
KILN_REGISTER_OP(flatten)
KILN_REGISTER_OP(squeeze)
KILN_REGISTER_OP(unsqueeze)
KILN_REGISTER_OP(squeeze_dynamic)
KILN_REGISTER_OP(transpose)
KILN_REGISTER_OP(broadcast)
KILN_REGISTER_OP(expand_dynamic)
KILN_REGISTER_OP(shape_of)
KILN_REGISTER_OP(size_of)

}  // namespace kiln::op
