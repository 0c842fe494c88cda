#include "core/shape_sampling.hpp"

#include <kiln/errors.hpp>
#include <kiln/literal.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::detail::sampling {

namespace {

// Ops are computed at a sample only when the product of the known values' magnitudes is at
// most this (what a Range or ConstantOfShape of them could allocate; models are untrusted).
constexpr std::int64_t largest_computed_value = std::int64_t{1} << 20;

std::int64_t as_signed(std::size_t v) {
    return v == dynamic_dimension::unbounded || v > static_cast<std::size_t>(unbounded) ? unbounded
                                                                                        : static_cast<std::int64_t>(v);
}

}  // namespace

std::string unknown_value_name(std::size_t input, std::size_t index) {
    return "#v" + std::to_string(input) + "_" + std::to_string(index);
}

symbolic_inputs::symbolic_inputs(const std::vector<shape>& in, bool split)
    : inputs(in), dims(in.size()), values(in.size()) {
    for (std::size_t i = 0; i < in.size(); ++i) {
        const auto& s = in[i];
        if (!s.is_tensor()) continue;
        for (auto& v : s.values()) {
            std::optional<dim_expr> e;
            if (!v.empty()) e = dim_expr::parse(v);
            else e = dim_expr::symbol(unknown_value_name(i, values[i].size()));
            if (e)
                for (auto& name : e->names()) ranges.try_emplace(name);
            values[i].push_back(std::move(e));
        }
        if (!s.dynamic()) continue;
        for (auto& d : s.dyn_dims()) {
            if (d.is_fixed()) {
                dims[i].emplace_back();
                continue;
            }
            std::optional<dim_expr> e;
            if (!d.symbol.empty()) e = dim_expr::parse(d.symbol);
            // Unnamed dims with the same bounds move together, as they did before dims
            // had names: x + x must see equal sizes when x's dims are unnamed.
            if (!e)
                e = dim_expr::symbol("#" + std::to_string(d.min) + "_" +
                                     (d.max == dynamic_dimension::unbounded ? std::string("u")
                                                                            : std::to_string(d.max)) +
                                     (split ? "_" + std::to_string(i) + "_" + std::to_string(dims[i].size())
                                            : std::string()));
            if (e->is_symbol()) {
                auto& r = ranges[e->terms().begin()->first];
                r.lo = std::max(r.lo, as_signed(d.min));
                r.hi = std::min(r.hi, as_signed(d.max));
                r.hi = std::max(r.hi, r.lo);
            } else {
                for (auto& name : e->names()) ranges.try_emplace(name);
            }
            // Inputs may know one name's bounds differently (a dim named from a value,
            // such as Expand to Shape's batch, has none): the tightest hold for all.
            auto [known, fresh] = by_expr.try_emplace(e->to_string(), d);
            if (!fresh) {
                auto& k = known->second;
                k.min = std::max(k.min, d.min);
                k.max = std::max(k.min, std::min(k.max, d.max));
                k.optimals.insert(d.optimals.begin(), d.optimals.end());
                std::erase_if(k.optimals, [&](std::size_t o) { return !k.contains(o); });
            }
            dims[i].push_back(std::move(e));
        }
    }
}

std::optional<point_inputs> symbolic_inputs::instantiate(const assignment& a) const {
    point_inputs out;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const auto& s = inputs[i];
        out.values.emplace_back();
        if (!s.is_tensor()) {
            out.shapes.push_back(s);
            continue;
        }
        if (!s.dynamic()) {
            out.shapes.push_back(s);
        } else {
            std::vector<std::size_t> lens;
            const auto& dd = s.dyn_dims();
            for (std::size_t k = 0; k < dd.size(); ++k) {
                if (!dims[i][k]) {
                    lens.push_back(dd[k].min);
                    continue;
                }
                auto v = dims[i][k]->evaluate(a);
                if (!v || *v < 0) return std::nullopt;
                lens.push_back(static_cast<std::size_t>(*v));
            }
            out.shapes.emplace_back(s.get_type(), lens);
        }
        if (values[i].empty()) {
            if (empty_int(s)) out.values.back() = literal(shape(s.get_type(), s.lens()), std::vector<std::int64_t>{}).get_argument();
            continue;
        }
        std::vector<std::int64_t> v;
        for (auto& e : values[i]) {
            auto x = e ? e->evaluate(a) : std::nullopt;
            if (!x) break;
            v.push_back(*x);
        }
        if (v.size() == values[i].size())
            out.values.back() = literal(shape(s.get_type(), s.lens()), v).get_argument();
    }
    return out;
}

std::int64_t clamp_to(const name_range& r, std::int64_t v) {
    return std::max(r.lo, std::min(v, std::min(r.hi, largest_sample)));
}

point evaluate_at(const symbolic_inputs& sym, const assignment& a, const shape_functions& f, std::string& first_error) {
    point p;
    std::optional<point_inputs> in;
    try {
        in = sym.instantiate(a);
    } catch (const error&) {
        return p;  // sizes no tensor can have: the op refuses this point
    }
    if (!in) return p;
    try {
        bool all_values = !in->values.empty() &&
                          std::all_of(in->values.begin(), in->values.end(), [](auto& v) { return v.has_value(); });
        std::optional<shape> out;
        if (f.shape_from_values) out = f.shape_from_values(in->shapes, in->values);
        if (!out) out = f.static_shape(in->shapes);
        // The product bounds what ConstantOfShape or Range could allocate from these values.
        double product = 1;
        for (auto& v : in->values)
            if (v)
                for (std::size_t i = 0; i < v->get_shape().elements(); ++i)
                    product *= std::max(1.0, std::fabs(static_cast<double>(v->get_int64(i))));
        bool modest = product <= static_cast<double>(largest_computed_value);
        bool computed = false;
        if (f.compute && all_values && (small_int(*out) || (out->dynamic() && modest))) {
            std::vector<argument> args;
            for (auto& v : in->values) args.push_back(*v);
            try {
                auto r = f.compute(*out, args);
                // A static result keeps the op's own layout (a broadcast is a stride-0 view).
                if (out->dynamic()) out = r.get_shape().as_standard();
                if (small_int(*out))
                    for (std::size_t i = 0; i < out->elements(); ++i) p.values.push_back(r.get_int64(i));
                computed = true;
            } catch (const std::exception&) {
                // Values are a bonus; a shape that needed them fails this point below.
            }
        }
        // Values the op gave itself (shape_of); with valued inputs they may be a passed-
        // through input's instead.
        bool any_value = std::any_of(in->values.begin(), in->values.end(), [](auto& v) { return v.has_value(); });
        if (!computed && !any_value && out->is_tensor() && !out->dynamic()) {
            for (auto& v : out->values()) p.values.push_back(is_number(v) ? std::optional(std::stoll(v)) : std::nullopt);
        }
        p.dynamic = out->dynamic();
        p.s = out->with_values({});
    } catch (const error& e) {
        if (first_error.empty()) first_error = e.what();
        p.s.reset();
    } catch (const std::exception&) {
        p.s.reset();
    }
    return p;
}

std::optional<dim_expr> fit(std::int64_t v0, const std::vector<std::string>& names, const std::vector<std::int64_t>& step,
                            const std::vector<std::int64_t>& moved, const assignment& a0, const assignment& av,
                            std::int64_t vv) {
    dim_expr e = dim_expr::constant(v0);
    for (std::size_t i = 0; i < names.size(); ++i) {
        auto c = (moved[i] - v0) * step[i];
        e += dim_expr::symbol(names[i]) * c;
        e += dim_expr::constant(-c * a0.at(names[i]));
    }
    if (e.evaluate(av) != vv) return std::nullopt;
    return e;
}

std::optional<dim_expr> fit_products(std::int64_t v0, const std::vector<std::string>& names,
                                     const std::vector<std::int64_t>& step, const std::vector<std::int64_t>& moved,
                                     const assignment& a0,
                                     const std::function<std::optional<std::int64_t>(std::size_t, std::size_t)>& pair,
                                     const assignment& av, std::int64_t vv) {
    const std::size_t n = names.size();
    std::vector<std::vector<std::int64_t>> k(n, std::vector<std::int64_t>(n, 0));
    bool any = false;
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j) {
            auto p = pair(i, j);
            if (!p) return std::nullopt;
            k[i][j] = k[j][i] = (*p - moved[i] - moved[j] + v0) * step[i] * step[j];
            any = any || k[i][j] != 0;
        }
    if (!any) return std::nullopt;  // the affine fit already said no
    dim_expr e = dim_expr::constant(v0);
    for (std::size_t i = 0; i < n; ++i) {
        std::int64_t c = (moved[i] - v0) * step[i];
        for (std::size_t j = 0; j < n; ++j)
            if (j != i) c -= k[i][j] * a0.at(names[j]);
        e += dim_expr::symbol(names[i]) * c;
        e += dim_expr::constant(-c * a0.at(names[i]));
        for (std::size_t j = i + 1; j < n; ++j)
            if (k[i][j] != 0) {
                e += dim_expr::product({names[i], names[j]}) * k[i][j];
                e += dim_expr::constant(-k[i][j] * a0.at(names[i]) * a0.at(names[j]));
            }
    }
    if (e.evaluate(av) != vv) return std::nullopt;
    return e;
}

std::vector<std::int64_t> static_sizes(const std::vector<shape>& inputs) {
    std::vector<std::int64_t> sizes;
    for (const auto& s : inputs) {
        if (!s.is_tensor()) continue;
        if (!s.dynamic()) {
            for (auto l : s.lens()) sizes.push_back(static_cast<std::int64_t>(l));
            // Known values too: sizes a Reshape or an Expand is given (Keypoint R-CNN's
            // [17, -1]: one dim of the map at 17 makes it fit).
            for (const auto& v : s.values())
                if (is_number(v)) sizes.push_back(std::stoll(v));
        } else {
            for (const auto& d : s.dyn_dims())
                if (d.is_fixed()) sizes.push_back(static_cast<std::int64_t>(d.min));
        }
    }
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    std::erase_if(sizes, [](std::int64_t v) { return v <= 1; });
    if (sizes.size() > 8) sizes.resize(8);
    return sizes;
}

}  // namespace kiln::detail::sampling
