#include "core/dynamic_shape_inference.hpp"

#include "core/shape_sampling.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>

#include <algorithm>
#include <map>

namespace kiln::detail {

bool is_number(const std::string& e) {
    std::size_t i = e.size() > 1 && e[0] == '-' ? 1 : 0;
    return i < e.size() && std::all_of(e.begin() + static_cast<std::ptrdiff_t>(i), e.end(),
                                       [](char c) { return c >= '0' && c <= '9'; });
}

bool small_int(const shape& s) {
    return s.is_tensor() && !s.dynamic() &&
           (s.get_type() == type::int64 || s.get_type() == type::int32 || s.get_type() == type::bool_) &&
           s.elements() > 0 && s.elements() <= shape::max_valued_elements;
}

bool empty_int(const shape& s) {
    return s.is_tensor() && !s.dynamic() &&
           (s.get_type() == type::int64 || s.get_type() == type::int32 || s.get_type() == type::bool_) &&
           s.elements() == 0;
}

bool has_symbolic_values(const std::vector<shape>& inputs) {
    for (auto& s : inputs)
        if (s.is_tensor())
            for (auto& v : s.values())
                if (!is_number(v)) return true;
    return false;
}

namespace {

using namespace sampling;

// No base point found: infer_dynamic_shape may try again with unnamed dims apart.
struct no_base {
    std::string message;
};

// `frozen` (shared names only): some unnamed name could not move at all from a base above 1,
// so the result may be pinned to sizes that only that sample had (GridSample's [?, ?, ?, ?]
// input and grid: the grid's last dim must be 2, and with every unnamed dim one name the whole
// result looked like a static [2, 2, 2, 2]). The caller then tries the dims apart.
std::optional<shape> infer_at(const std::string& op_name, const std::vector<shape>& inputs, const shape_functions& f,
                              bool split, bool& frozen) {
    symbolic_inputs sym(inputs, split);
    std::string first_error;
    auto run = [&](const assignment& a) { return evaluate_at(sym, a, f, first_error); };
    auto at = [&](auto pick) {
        assignment a;
        for (auto& [name, r] : sym.ranges) a[name] = clamp_to(r, pick(r));
        return a;
    };

    // `a` with every dim (named or not; unknown values kept) at `size`, within its range.
    auto every_dim_at = [&](assignment a, std::int64_t size) {
        for (auto& [other, r2] : sym.ranges)
            if (!unknown_value(other)) a[other] = clamp_to(r2, size);
        return a;
    };
    // A base point that the op accepts: sizes of at least 1 (0 hides too much: Keypoint
    // R-CNN's Reshape(roi_map [?, ?, ?], [17, -1]) takes an empty map and makes its -1 a 0,
    // which is then taken as the size; apart, one dim at 17 gives the real answer). Sizes of
    // 0 only when nothing else runs, and with shared names not at all (apart they may).
    const auto lowest = [](const name_range& r) { return r.lo; };
    const std::vector<std::function<std::int64_t(const name_range&)>> bases = {
        [](const name_range& r) { return std::max<std::int64_t>(r.lo, 1); },
        [](const name_range& r) { return std::max<std::int64_t>(r.lo, 1) + 1; },
        [](const name_range& r) { return std::max<std::int64_t>(r.lo, 1) + 5; },
    };
    assignment a0;
    point r0;
    for (auto& b : bases) {
        a0 = at(b);
        r0 = run(a0);
        if (r0.dynamic) return std::nullopt;
        if (r0.s) break;
    }
    // Apart, one unnamed dim may start at a size an input has (x[?, ?, ?] @ w[96, 288]: the
    // inner one at 96; attention's [?, 3, 49, 49] @ v[?, ?, ?, ?]: v's third at 49), or all of
    // them (Mask R-CNN's anchors, Concat([x, y, x, y], axis 1) with x already [40000, 1]).
    // Only apart: a name that several unnamed dims share would tie them to that size (a
    // convolution's [?, ?, ?, ?] input at its 256 channels would be taken as 256 everywhere).
    if (split && !r0.s) {
        const auto sizes = static_sizes(inputs);
        const assignment first = at(bases.front());
        for (auto& [name, r] : sym.ranges) {
            if (r0.s) break;
            if (!anonymous(name) || unknown_value(name)) continue;
            for (auto size : sizes) {
                a0 = first;
                a0[name] = clamp_to(r, size);
                r0 = run(a0);
                if (r0.dynamic) return std::nullopt;
                if (r0.s) break;
            }
        }
        for (auto size : sizes) {
            if (r0.s) break;
            a0 = first;
            for (auto& [name, r] : sym.ranges)
                if (anonymous(name) && !unknown_value(name)) a0[name] = clamp_to(r, size);
            r0 = run(a0);
            if (r0.dynamic) return std::nullopt;
        }
    }
    // Apart, dims at sizes of their own: a named one at an input's size, then every dim at
    // one (a convolution of x [N, C, H, W] with every dim symbolic: C must be the weights'
    // 3, and H and W at least the kernel's), then any one at a small size (a volumetric
    // GridSample's grid ends in a dim that must be 3).
    if (split && !r0.s) {
        const assignment first = at(bases.front());
        const auto sizes = static_sizes(inputs);
        auto try_at = [&](const assignment& a) {
            if (a == first) return;
            a0 = a;
            r0 = run(a0);
        };
        for (auto& [name, r] : sym.ranges) {
            if (r0.s || r0.dynamic) break;
            if (anonymous(name) || unknown_value(name)) continue;
            for (auto size : sizes) {
                auto a = first;
                a[name] = clamp_to(r, size);
                try_at(a);
                if (r0.s || r0.dynamic) break;
            }
        }
        for (auto size : sizes) {
            if (r0.s || r0.dynamic) break;
            try_at(every_dim_at(first, size));
        }
        for (auto& [name, r] : sym.ranges) {
            if (r0.s || r0.dynamic) break;
            if (unknown_value(name)) continue;
            for (std::int64_t size : {2, 3, 4}) {
                auto a = first;
                a[name] = clamp_to(r, size);
                try_at(a);
                if (r0.s || r0.dynamic) break;
            }
        }
        if (r0.dynamic) return std::nullopt;
    }
    if (split && !r0.s) {
        a0 = at(lowest);
        r0 = run(a0);
        if (r0.dynamic) return std::nullopt;
    }
    if (!r0.s) throw no_base{op_name + ": cannot infer a shape for dynamic inputs: " + first_error};
    // Sequences and optionals: what the op says at the base point's sizes, as before.
    if (!r0.s->is_tensor() && !r0.s->is_tuple()) return r0.s;

    // Move each name on its own, then all of them at once to check the fit.
    std::vector<std::string> names;
    std::vector<std::int64_t> step;
    std::vector<point> moved;
    std::vector<std::pair<assignment, point>> joint;  // named dims moved with the unnamed ones
    bool unmoved_unnamed = false;  // an unnamed dim the op refused to move
    std::vector<std::string> unmoved;  // those names, apart: pairs of them may move together
    bool all_ran = true;
    for (auto& [name, r] : sym.ranges) {
        auto v = a0[name];
        std::int64_t d = v + 1 <= std::min(r.hi, largest_sample) ? 1 : (v - 1 >= r.lo ? -1 : 0);
        if (d == 0) continue;  // a name with one possible size is a constant here
        auto a = a0;
        a[name] = v + d;
        auto p = run(a);
        if (p.dynamic) return std::nullopt;
        // An unnamed dim the op refuses to move on its own is one that must match a named
        // one (a mask of computed size added to scores of "past + sequence"): the sample
        // at which it is 1 broadcasts, and the result does not depend on it. Except where the
        // result is 1 too: unnamed dims share a name, and one of them may be a broadcast
        // batch (Swin's [?, ?, ?, ?] scores plus a [1, 3, 49, 49] bias cannot move together,
        // and the sum's first dim is the scores' own), so those stay unknown.
        if (!p.s && anonymous(name)) {
            // Unless it moves with every named dim (it must meet them, as this one's masks
            // [1, ?, ?] meet the canvas [n, h, w]): then it is no broadcast.
            auto aj = every_dim_at(a, a[name]);
            auto pj = aj == a ? point{} : run(aj);
            if (pj.dynamic) return std::nullopt;
            if (pj.s) {
                joint.emplace_back(std::move(aj), std::move(pj));
            } else {
                unmoved_unnamed = true;
                unmoved.push_back(name);
                frozen = frozen || (!split && v > 1);
            }
            continue;
        }
        if (!p.s) {
            // A named dim the op refuses to move on its own must match unnamed ones (a Concat
            // with an Expand to a computed shape): move them together. A dim that changes
            // there cannot be told apart by name, so it becomes unknown (never a static size
            // seen only at the points that ran); if even that fails, this op cannot be shaped.
            auto aj = a;
            for (auto& [other, r2] : sym.ranges)
                if (anonymous(other)) aj[other] = clamp_to(r2, a[name]);
            auto pj = run(aj);
            if (pj.dynamic) return std::nullopt;
            if (!pj.s) {
                // Other named dims may have to meet the unnamed ones too (Mask R-CNN's masks so
                // far [n, h, w] and this one [1, ?, ?]): every dim at this size.
                aj = every_dim_at(aj, a[name]);
                pj = run(aj);
                if (pj.dynamic) return std::nullopt;
            }
            if (!pj.s) {
                // With another named dim (two names a model keeps equal: "batch" and "N").
                for (auto& [other, r2] : sym.ranges) {
                    if (other == name || anonymous(other) || unknown_value(other)) continue;
                    auto ap = a;
                    ap[other] = a[name];
                    if (ap[other] < r2.lo || ap[other] > r2.hi || ap == a) continue;
                    auto pp = run(ap);
                    if (pp.dynamic) return std::nullopt;
                    if (pp.s) joint.emplace_back(std::move(ap), std::move(pp));
                }
                // Else the op takes this name at one size only (PRelu's channels against a
                // [3] slope): every run that works has it there, so nothing follows it.
                continue;
            }
            joint.emplace_back(std::move(aj), std::move(pj));
            continue;
        }
        names.push_back(name);
        step.push_back(d);
        all_ran = all_ran && p.s.has_value();
        moved.push_back(std::move(p));
    }
    // Apart, two unnamed dims that can move only together (GridSample's input and grid
    // batches): their joint point shows what follows them; without it the result would keep
    // the base's size there as if it were static.
    if (split && unmoved.size() <= 12)
        for (std::size_t i = 0; i < unmoved.size(); ++i)
            for (std::size_t j = i + 1; j < unmoved.size(); ++j) {
                auto a = a0;
                for (const auto* name : {&unmoved[i], &unmoved[j]}) {
                    const auto& r = sym.ranges[*name];
                    const auto v = a0[*name];
                    a[*name] = v + 1 <= std::min(r.hi, largest_sample) ? v + 1 : v - 1;
                }
                if (a[unmoved[i]] != a[unmoved[j]] || a[unmoved[i]] < sym.ranges[unmoved[i]].lo ||
                    a[unmoved[j]] < sym.ranges[unmoved[j]].lo)
                    continue;  // two dims that meet move to one size, within both ranges
                auto p = run(a);
                if (p.dynamic) return std::nullopt;
                if (p.s) joint.emplace_back(std::move(a), std::move(p));
            }
    assignment av = a0;
    for (std::size_t i = 0; i < names.size(); ++i)
        av[names[i]] = clamp_to(sym.ranges[names[i]], a0[names[i]] + 2 + static_cast<std::int64_t>(i % 3));
    auto rv = run(av);
    if (rv.dynamic) return std::nullopt;
    all_ran = all_ran && rv.s.has_value();

    // Points with two named dims moved together, made on first use: what a dim or value that
    // the affine fit refused needs to be fitted as a product of names.
    std::map<std::pair<std::size_t, std::size_t>, point> pairs;
    auto pair_point = [&](std::size_t i, std::size_t j) -> const point* {
        if (anonymous(names[i]) || anonymous(names[j])) return nullptr;  // nothing could refer to it
        auto it = pairs.find({i, j});
        if (it == pairs.end()) {
            auto a = a0;
            a[names[i]] += step[i];
            a[names[j]] += step[j];
            it = pairs.emplace(std::pair{i, j}, run(a)).first;
        }
        return it->second.dynamic || !it->second.s ? nullptr : &it->second;
    };

    // Sizes moved by one from small samples can leave a result unchanged that still depends
    // on them (Swin's window count, a size divided by 7; a slice to -7 of an unnamed dim is
    // empty at every small size): one more point, with every unnamed dim and unknown value
    // far from the base, must agree before a dim or value is taken as constant or affine.
    // Where the op refuses that point, nothing is concluded from the samples if unknown values
    // are involved; dims alone keep what the near samples said.
    // A second far point spreads them apart (each unknown value its own distance, the unnamed
    // dims beyond them all): moved together, a slice from one unknown value to another
    // (RetinaNet's anchors per level, start and start + n) is empty at every point, though
    // its length is n. Where the op refuses that point it proves nothing either way.
    std::vector<std::pair<assignment, point>> far;
    // Named dims far from the base too, the unnamed ones kept, for what the near steps found
    // constant only: a strided convolution's (samples - 10) / 5 + 1 is 1 at its base (samples
    // at the kernel's 10) and at every near step, and was taken as a static 1 (wav2vec2's
    // feature extractor). Affine results are not checked there: a model may bound a name's
    // arithmetic (GPT's past + sequence by its mask's 512 positions), and the fit holds below
    // that. Where the op refuses that point it proves nothing.
    std::optional<std::pair<assignment, point>> far_named;
    {
        assignment an = a0;
        for (auto& [name, r] : sym.ranges)
            if (!anonymous(name)) an[name] = clamp_to(r, a0[name] + far_step);
        if (an != a0) {
            auto pn = run(an);
            if (!pn.dynamic && pn.s) far_named.emplace(std::move(an), std::move(pn));
        }
    }
    const bool values_unknown =
        std::any_of(sym.ranges.begin(), sym.ranges.end(), [](auto& kv) { return unknown_value(kv.first); });
    if (std::any_of(sym.ranges.begin(), sym.ranges.end(), [](auto& kv) { return anonymous(kv.first); })) {
        // Named dims stay: their sizes may be bounded by the model (GPT's past + sequence by
        // its mask's length), past which its arithmetic is not meant to hold.
        assignment af = a0;
        for (auto& [name, r] : sym.ranges)
            if (anonymous(name)) af[name] = unknown_value(name) ? a0[name] + far_step : clamp_to(r, a0[name] + far_step);
        auto pf = run(af);
        if (values_unknown && (pf.dynamic || !pf.s)) return std::nullopt;
        if (!pf.dynamic && pf.s) far.emplace_back(std::move(af), std::move(pf));
        if (values_unknown) {
            assignment as = a0;
            std::int64_t k = 1;
            for (auto& [name, r] : sym.ranges)
                if (unknown_value(name)) as[name] = a0[name] + far_step * k++;
            for (auto& [name, r] : sym.ranges)
                if (anonymous(name) && !unknown_value(name)) as[name] = clamp_to(r, a0[name] + far_step * (k + 1));
            auto ps = run(as);
            if (ps.dynamic) return std::nullopt;
            if (ps.s) far.emplace_back(std::move(as), std::move(ps));
        }
    }

    // Bounds of anything that is not affine: the results at the smallest and largest sizes.
    std::optional<point> lo_result, hi_result;
    auto bound_results = [&] {
        if (lo_result) return;
        lo_result = run(at([](const name_range& r) { return r.lo; }));
        bool bounded = std::all_of(sym.ranges.begin(), sym.ranges.end(),
                                   [](auto& kv) { return kv.second.hi < largest_sample; });
        hi_result = bounded ? run(at([](const name_range& r) { return r.hi; })) : point{};
    };

    // One tensor of the result (the result itself, or an element of a tuple result such as
    // Split's), picked out of each point's result.
    auto fit_tensor = [&](auto pick) -> shape {
        const shape& t0 = *pick(*r0.s);
        std::vector<const shape*> results{&t0};
        for (auto& m : moved)
            if (m.s) results.push_back(pick(*m.s));
        if (rv.s) results.push_back(pick(*rv.s));
        for (auto* r : results)
            if (r == nullptr || !r->is_tensor() || r->dynamic() || r->ndim() != t0.ndim() ||
                r->get_type() != t0.get_type())
                throw_error(error_code::unsupported,
                            op_name + ": output rank or type depends on dynamic input dimensions");
        auto usable = [&](const point& p) -> const shape* {
            if (!p.s || p.dynamic) return nullptr;
            auto* t = pick(*p.s);
            return t && t->is_tensor() && !t->dynamic() && t->ndim() == t0.ndim() ? t : nullptr;
        };
        std::vector<dynamic_dimension> dims;
        bool any_dyn = false;
        const auto& l0 = t0.lens();
        for (std::size_t j = 0; j < l0.size(); ++j) {
            const auto v0 = static_cast<std::int64_t>(l0[j]);
            bool same = std::all_of(results.begin(), results.end(),
                                    [&](const shape* r) { return static_cast<std::int64_t>(r->lens()[j]) == v0; });
            // The value at each joint point (-1 where it has no usable tensor here).
            auto joint_value = [&](const std::pair<assignment, point>& jp) -> std::int64_t {
                const shape* t = jp.second.s ? pick(*jp.second.s) : nullptr;
                return t && t->is_tensor() && !t->dynamic() && t->ndim() == t0.ndim()
                           ? static_cast<std::int64_t>(t->lens()[j])
                           : -1;
            };
            const bool joint_same = std::all_of(joint.begin(), joint.end(),
                                                [&](const auto& jp) { return joint_value(jp) == v0; });
            const bool far_agrees =
                std::all_of(far.begin(), far.end(), [&](const auto& fp) { return joint_value(fp) == v0; }) &&
                (!far_named || joint_value(*far_named) == v0);
            if (same && joint_same && far_agrees && !(unmoved_unnamed && v0 == 1)) {
                dims.push_back({l0[j], l0[j], {}});
                continue;
            }
            any_dyn = true;
            if (all_ran && !same) {
                std::vector<std::int64_t> mv;
                for (auto& m : moved) mv.push_back(static_cast<std::int64_t>(pick(*m.s)->lens()[j]));
                const auto vv = static_cast<std::int64_t>(pick(*rv.s)->lens()[j]);
                auto e = fit(v0, names, step, mv, a0, av, vv);
                if (!e && names.size() >= 2)
                    e = fit_products(v0, names, step, mv, a0,
                                     [&](std::size_t a, std::size_t b) -> std::optional<std::int64_t> {
                                         const point* p = pair_point(a, b);
                                         const shape* t = p ? usable(*p) : nullptr;
                                         if (!t) return std::nullopt;
                                         return static_cast<std::int64_t>(t->lens()[j]);
                                     },
                                     av, vv);
                // The names that moved must explain the joint points (and the far one) too.
                for (auto& jp : joint)
                    if (e && e->evaluate(jp.first) != joint_value(jp)) e.reset();
                for (auto& fp : far)
                    if (e && e->evaluate(fp.first) != joint_value(fp)) e.reset();
                if (e) {
                    auto known = sym.by_expr.find(e->to_string());
                    if (known != sym.by_expr.end()) {
                        dims.push_back(known->second);
                        continue;
                    }
                    // Bounds from the names' ranges.
                    std::int64_t lo = e->constant_term(), hi = e->constant_term();
                    bool named = true, any_value = false;
                    for (auto& [term, c] : e->terms()) {
                        // The term's range: the product of its names' (dims: never negative).
                        name_range r{1, 1};
                        for (auto& name : dim_expr::factors(term)) {
                            any_value = any_value || unknown_value(name);
                            named = named && !anonymous(name);
                            const auto& f = sym.ranges[name];
                            r.lo *= f.lo;
                            r.hi = r.hi == unbounded || f.hi == unbounded || (f.hi != 0 && r.hi > unbounded / f.hi)
                                       ? unbounded
                                       : r.hi * f.hi;
                        }
                        lo = c > 0 ? lo + c * r.lo : (r.hi == unbounded ? 0 : lo + c * r.hi);
                        if (hi != unbounded)
                            hi = c > 0 ? (r.hi == unbounded ? unbounded : hi + c * r.hi) : hi + c * r.lo;
                    }
                    dynamic_dimension d;
                    d.min = static_cast<std::size_t>(std::max<std::int64_t>(lo, 0));
                    d.max = hi == unbounded
                                ? dynamic_dimension::unbounded
                                : std::max(d.min, static_cast<std::size_t>(std::max<std::int64_t>(hi, 0)));
                    if (named) d.symbol = e->to_string();
                    if (any_value) d = dynamic_dimension{0, dynamic_dimension::unbounded, {}};
                    dims.push_back(d);
                    continue;
                }
            }
            dynamic_dimension d{0, dynamic_dimension::unbounded, {}};
            if (values_unknown) {  // may depend on unknown values: no bounds
                dims.push_back(d);
                continue;
            }
            bound_results();
            if (auto* t = usable(*lo_result)) d.min = t->lens()[j];
            if (auto* t = usable(*hi_result)) d.max = std::max(t->lens()[j], d.min);
            dims.push_back(d);
        }
        return any_dyn ? shape::make_dynamic(t0.get_type(), dims) : t0;
    };

    if (r0.s->is_tuple()) {
        std::vector<shape> elements;
        const auto n = r0.s->sub_shapes().size();
        for (std::size_t e = 0; e < n; ++e)
            elements.push_back(fit_tensor([&](const shape& r) -> const shape* {
                return r.is_tuple() && r.sub_shapes().size() == n ? &r.sub_shapes()[e] : nullptr;
            }));
        return shape::tuple(std::move(elements));
    }
    if (!r0.s->is_tensor()) return r0.s;
    auto fitted = fit_tensor([](const shape& r) -> const shape* { return &r; });
    if (fitted.dynamic()) return fitted;

    // A static result: its values, where each follows the names affinely.
    shape out = *r0.s;
    if (!small_int(out) || r0.values.size() != out.elements()) return out;
    std::vector<std::string> values;
    bool any_known = false;
    for (std::size_t j = 0; j < r0.values.size(); ++j) {
        std::optional<dim_expr> e;
        bool have = r0.values[j].has_value() && all_ran && rv.values.size() == r0.values.size() && rv.values[j];
        std::vector<std::int64_t> mv;
        for (auto& m : moved) {
            have = have && m.values.size() == r0.values.size() && m.values[j];
            if (have) mv.push_back(*m.values[j]);
        }
        if (have) e = fit(*r0.values[j], names, step, mv, a0, av, *rv.values[j]);
        if (have && !e && names.size() >= 2)
            e = fit_products(*r0.values[j], names, step, mv, a0,
                             [&](std::size_t a, std::size_t b) -> std::optional<std::int64_t> {
                                 const point* p = pair_point(a, b);
                                 if (!p || p->values.size() != r0.values.size()) return std::nullopt;
                                 return p->values[j];
                             },
                             av, *rv.values[j]);
        for (auto& [aj, pj] : joint)
            if (e && (pj.values.size() != r0.values.size() || !pj.values[j] || e->evaluate(aj) != *pj.values[j]))
                e.reset();
        for (auto& [af, pf] : far)
            if (e && (pf.values.size() != r0.values.size() || !pf.values[j] || e->evaluate(af) != *pf.values[j]))
                e.reset();
        if (e && e->is_constant() && far_named) {
            const auto& pf = far_named->second;
            if (pf.values.size() != r0.values.size() || !pf.values[j] || *pf.values[j] != e->constant_term()) e.reset();
        }
        // A value of an unnamed dim is not worth keeping: nothing else can refer to it.
        if (e) {
            const auto names_of_e = e->names();
            if (std::any_of(names_of_e.begin(), names_of_e.end(), anonymous)) e.reset();
        }
        values.push_back(e ? e->to_string() : std::string());
        any_known = any_known || e.has_value();
    }
    // Shape arithmetic keeps being followed where its values are unknown: its inputs had
    // values, or the op gave them itself (Shape of a tensor whose only dim is unnamed: Mask
    // R-CNN's RoI count, whose <?> feeds a Concat with 256, 14, 14 that must keep them).
    const bool followed = std::any_of(inputs.begin(), inputs.end(), [](const shape& i) { return i.has_values(); }) ||
                          std::all_of(r0.values.begin(), r0.values.end(), [](const auto& v) { return v.has_value(); });
    return any_known || followed ? out.with_values(std::move(values)) : out;
}

}  // namespace

std::optional<shape> infer_dynamic_shape(const std::string& op_name, const std::vector<shape>& inputs,
                                         const shape_functions& f) {
    bool frozen = false;
    std::optional<shape> together;
    try {
        together = infer_at(op_name, inputs, f, false, frozen);
        if (!frozen) return together;
    } catch (const no_base& shared) {
        // Unnamed dims share a name per bounds, so x + x moves its dims together; where that
        // finds no base (one of them must equal a sized dim), each moves apart.
        try {
            return infer_at(op_name, inputs, f, true, frozen);
        } catch (const no_base&) {
            throw_error(error_code::shape, shared.message);
        }
    }
    // Frozen together: apart if that finds a base, else what the shared names said.
    try {
        return infer_at(op_name, inputs, f, true, frozen);
    } catch (const no_base&) {
        return together;
    }
}

}  // namespace kiln::detail
