#include "passes/rewrite_utils.hpp"

#include <algorithm>
#include <cmath>

namespace kiln::rewrite {

bool is_output(module& m, instruction_ref ins) {
    const auto& outs = ins->outputs();
    if (std::any_of(outs.begin(), outs.end(), [](auto u) { return u->is_return(); })) return true;
    return m.get_return() == m.end() && std::next(ins) == m.end();
}

bool only_used_by(module& m, instruction_ref ins, instruction_ref user) {
    return ins->outputs().size() == 1 && ins->outputs().front() == user && !is_output(m, ins);
}

bool unused(instruction_ref ins) { return ins->outputs().empty(); }

std::optional<literal> constant_of(instruction_ref ins) {
    if (ins->is_literal() && ins->get_shape().is_tensor() && !ins->get_shape().dynamic()) return ins->get_literal();
    return std::nullopt;
}

bool is_constant(instruction_ref ins) { return constant_of(ins).has_value(); }

std::optional<std::vector<std::int64_t>> constant_indices(instruction_ref idx, std::size_t extent) {
    if (!idx->is_literal() || idx->get_shape().ndim() != 1) return std::nullopt;
    const auto t = idx->get_shape().get_type();
    if (t != type::int64 && t != type::int32) return std::nullopt;
    auto v = idx->get_literal().to_vector<std::int64_t>();
    const auto n = static_cast<std::int64_t>(extent);
    for (auto& i : v) {
        if (i < 0) i += n;
        if (i < 0 || i >= n) return std::nullopt;
    }
    return v;
}

bool is_float(type t) {
    switch (t) {
        case type::float16:
        case type::bfloat16:
        case type::float32:
        case type::float64: return true;
        default: return false;
    }
}

bool is_wide_float(type t) { return t == type::float32 || t == type::float64; }

std::vector<double> values_of(const literal& l) { return l.to_vector<double>(); }

literal make_literal(const shape& s, const std::vector<double>& values) {
    return literal(shape(s.get_type(), s.lens()), values);
}

bool all_equal(const literal& l, double v) {
    auto xs = values_of(l);
    return !xs.empty() && std::all_of(xs.begin(), xs.end(), [&](double x) { return x == v; });
}

bool all_signed_zero(const literal& l, bool sign_bit) {
    auto xs = values_of(l);
    return !xs.empty() &&
           std::all_of(xs.begin(), xs.end(), [&](double x) { return x == 0.0 && std::signbit(x) == sign_bit; });
}

std::optional<std::vector<std::size_t>> broadcast_lens(const std::vector<std::size_t>& a,
                                                       const std::vector<std::size_t>& b) {
    const std::size_t r = std::max(a.size(), b.size());
    std::vector<std::size_t> out(r);
    for (std::size_t i = 0; i < r; ++i) {
        std::size_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
        std::size_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
        if (x != y && x != 1 && y != 1) return std::nullopt;
        out[i] = x == 1 ? y : x;
    }
    return out;
}

std::optional<std::vector<double>> values_along_axis(const literal& c, const std::vector<std::size_t>& out,
                                                     std::size_t axis) {
    const auto& lens = c.get_shape().lens();
    if (lens.size() > out.size() || axis >= out.size()) return std::nullopt;
    const std::size_t pad = out.size() - lens.size();
    std::size_t along = 1;  // c's length along `axis` (1: the same value everywhere)
    for (std::size_t d = 0; d < out.size(); ++d) {
        const std::size_t l = d < pad ? 1 : lens[d - pad];
        if (l == 1) continue;
        if (l != out[d]) return std::nullopt;  // would broadcast `out` itself
        if (d != axis) return std::nullopt;    // varies along another axis
        along = l;
    }
    auto xs = values_of(c);
    std::vector<double> r(out[axis]);
    for (std::size_t i = 0; i < r.size(); ++i) r[i] = xs[along == 1 ? 0 : i];
    return r;
}

std::vector<double> broadcast_values(const literal& c, const std::vector<std::size_t>& out) {
    const auto& lens = c.get_shape().lens();
    const std::size_t pad = out.size() - lens.size();
    // Row-major strides of c over out's dims, 0 where c is broadcast.
    std::vector<std::size_t> strides(out.size(), 0);
    std::size_t stride = 1;
    for (std::size_t d = out.size(); d-- > pad;) {
        const std::size_t l = lens[d - pad];
        if (l != 1) strides[d] = stride;
        stride *= l;
    }
    auto xs = values_of(c);
    std::size_t n = 1;
    for (auto l : out) n *= l;
    std::vector<double> r(n);
    std::vector<std::size_t> idx(out.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        std::size_t off = 0;
        for (std::size_t d = 0; d < out.size(); ++d) off += idx[d] * strides[d];
        r[i] = xs[off];
        for (std::size_t d = out.size(); d-- > 0;) {
            if (++idx[d] < out[d]) break;
            idx[d] = 0;
        }
    }
    return r;
}

}  // namespace kiln::rewrite
