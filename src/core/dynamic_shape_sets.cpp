// Which sets of input shapes a dynamic program compiles ahead (see dynamic_shape_sets.hpp).
#include "core/dynamic_shape_sets.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>

#include <algorithm>

namespace kiln {

// The key of an input dim in `values` maps: its name, or "#input:axis" for an unnamed one;
// nullopt for a dim spelled as an expression of names.
std::optional<std::string> dim_key(const std::string& input, std::size_t axis, const dynamic_dimension& d) {
    if (d.symbol.empty()) return "#" + input + ":" + std::to_string(axis);
    auto e = dim_expr::parse(d.symbol);
    if (e && !e->is_symbol()) return std::nullopt;
    return d.symbol;
}

// The inputs' declared shapes with the dims named in `values` fixed at those sizes (a dim
// spelled as an expression too, when all its names are given); the others stay ranges.
shape_map fix_dims(const module& main, const std::map<std::string, std::int64_t>& values) {
    shape_map set;
    for (auto& ins : main) {
        if (!ins.is_param() || !ins.get_shape().is_tensor() || !ins.get_shape().dynamic()) continue;
        auto dims = ins.get_shape().dyn_dims();
        for (std::size_t i = 0; i < dims.size(); ++i) {
            if (dims[i].is_fixed()) continue;
            std::optional<std::int64_t> v;
            if (auto k = dim_key(ins.param_name(), i, dims[i])) {
                if (auto it = values.find(*k); it != values.end()) v = it->second;
            } else if (auto e = dim_expr::parse(dims[i].symbol)) {
                v = e->evaluate(values);
            }
            if (v && *v >= 0 && dims[i].contains(static_cast<std::size_t>(*v)))
                dims[i] = dynamic_dimension{std::size_t(*v), std::size_t(*v), {}};
        }
        set.emplace(ins.param_name(), shape::make_dynamic(ins.get_shape().get_type(), dims));
    }
    return set;
}

// The input shapes of the programs worth compiling ahead: each combination of the
// optimals of the dims that have them (at most `limit`), with those dims fixed and the
// others left as ranges. Dims that share a name are fixed together; a dim spelled as an
// expression ("past + sequence") is fixed when all its names are.
std::vector<shape_map> optimal_shape_sets(const module& main, std::size_t limit) {
    struct dim_at {
        std::string input;
        std::size_t axis;
    };
    std::map<std::string, std::vector<dim_at>> groups;  // name (or "#input:axis") -> its dims
    std::map<std::string, std::set<std::size_t>> optimals;
    std::vector<std::pair<dim_at, dim_expr>> expressions;
    std::map<std::string, shape> declared;
    for (auto& ins : main) {
        if (!ins.is_param() || !ins.get_shape().is_tensor() || !ins.get_shape().dynamic()) continue;
        declared.emplace(ins.param_name(), ins.get_shape());
        const auto& dd = ins.get_shape().dyn_dims();
        for (std::size_t i = 0; i < dd.size(); ++i) {
            if (dd[i].is_fixed()) continue;
            auto name = dim_key(ins.param_name(), i, dd[i]);
            if (!name) {
                expressions.emplace_back(dim_at{ins.param_name(), i}, *dim_expr::parse(dd[i].symbol));
                continue;
            }
            groups[*name].push_back({ins.param_name(), i});
            optimals[*name].insert(dd[i].optimals.begin(), dd[i].optimals.end());
        }
    }
    std::vector<std::map<std::string, std::int64_t>> combos{{}};
    for (auto& [name, opts] : optimals) {
        if (opts.empty()) continue;
        std::vector<std::map<std::string, std::int64_t>> next;
        for (auto& c : combos)
            for (auto v : opts) {
                if (next.size() >= limit) break;
                auto d = c;
                d[name] = static_cast<std::int64_t>(v);
                next.push_back(std::move(d));
            }
        combos = std::move(next);
    }
    std::vector<shape_map> sets;
    if (combos.size() == 1 && combos.front().empty()) return sets;  // no optimals at all
    for (auto& values : combos) sets.push_back(fix_dims(main, values));
    return sets;
}

// The input shapes of the buckets' programs: each combination of the buckets' sizes (at
// most `limit`), those dims fixed and every other dim a range. Sizes outside a dim's range
// are left out.
std::vector<shape_map> bucket_shape_sets(const module& main, const std::vector<dim_buckets>& buckets,
                                                               std::size_t limit) {
    std::vector<std::map<std::string, std::int64_t>> combos{{}};
    for (auto& b : buckets) {
        if (b.dim.empty() || b.sizes.empty()) continue;
        std::vector<std::map<std::string, std::int64_t>> next;
        for (auto& c : combos)
            for (auto v : b.sizes) {
                if (next.size() >= limit) break;
                auto d = c;
                d[b.dim] = static_cast<std::int64_t>(v);
                next.push_back(std::move(d));
            }
        combos = std::move(next);
    }
    std::vector<shape_map> sets;
    if (combos.size() == 1 && combos.front().empty()) return sets;
    for (auto& values : combos) {
        auto set = fix_dims(main, values);
        // A size outside its dim's range leaves the dim a range: not this bucket's program.
        bool fixed = true;
        for (auto& [name, v] : values)
            for (auto& [input, sh] : set) {
                const auto& dd = sh.to_dynamic_dims();
                for (std::size_t i = 0; i < dd.size(); ++i)
                    if (dd[i].symbol == name && !dd[i].is_fixed()) fixed = false;
            }
        if (fixed) sets.push_back(std::move(set));
    }
    return sets;
}

// The share of main's dynamic instructions that become static when only the names `free`
// stay ranges (a decoder's past length free: most of them; an encoder's sequence: almost
// none, since everything depends on it).
double static_fraction(const module& main, const std::set<std::string>& free) {
    std::size_t dynamic = 0, fixed = 0;
    for (auto& ins : main) {
        const auto& s = ins.get_shape();
        if (!s.is_tensor() || !s.dynamic()) continue;
        ++dynamic;
        bool depends = false;
        for (auto& d : s.dyn_dims()) {
            if (d.is_fixed()) continue;
            auto e = d.symbol.empty() ? std::nullopt : dim_expr::parse(d.symbol);
            if (!e) {
                depends = true;  // an unnamed range: it may follow from anything
                break;
            }
            for (auto& name : e->names()) depends = depends || free.count(name) > 0;
            if (depends) break;
        }
        fixed += depends ? 0 : 1;
    }
    return dynamic == 0 ? 1.0 : static_cast<double>(fixed) / static_cast<double>(dynamic);
}

// The names of the dims that `set` leaves as ranges ("#input:axis" for unnamed ones).
std::set<std::string> free_names(const shape_map& set) {
    std::set<std::string> names;
    for (auto& [input, s] : set) {
        if (!s.dynamic()) continue;
        const auto& dd = s.dyn_dims();
        for (std::size_t i = 0; i < dd.size(); ++i) {
            if (dd[i].is_fixed()) continue;
            if (auto k = dim_key(input, i, dd[i])) {
                names.insert(*k);
                continue;
            }
            const auto e = dim_expr::parse(dd[i].symbol);  // an expression of names (dim_key)
            for (auto& name : e->names()) names.insert(name);
        }
    }
    return names;
}

}  // namespace kiln
