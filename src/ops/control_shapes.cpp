#include "ops/control_shapes.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/module.hpp>

#include <algorithm>

namespace kiln::op {

namespace {
// The sentinel optimals that mark the unknown element and the element of conflicting
// ranks; no real dimension has them.
constexpr std::size_t unknown_marker = dynamic_dimension::unbounded;
constexpr std::size_t conflict_marker = dynamic_dimension::unbounded - 1;

shape marked_element(type t, std::size_t marker) {
    return shape::make_dynamic(t, {dynamic_dimension{0, dynamic_dimension::unbounded, {marker}}});
}

bool has_marker(const shape& s, std::size_t marker) {
    if (!s.is_tensor() || !s.dynamic() || s.ndim() != 1) return false;
    return s.dyn_dims().front().optimals.count(marker) > 0;
}

bool same_kind(const shape& a, const shape& b) { return a.get_kind() == b.get_kind(); }

shape merge_tensors(const shape& a, const shape& b, const std::string& what) {
    if (a.get_type() != b.get_type())
        throw_error(error_code::type, what + ": element types " + std::string(type_name(a.get_type())) + " and " +
                                          std::string(type_name(b.get_type())) + " disagree");
    // Conflicting ranks stay conflicting whatever joins them (an If whose branch gives
    // another rank may run that branch); an element nothing is known of yields the other.
    if (has_marker(a, conflict_marker) || has_marker(b, conflict_marker)) return marked_element(a.get_type(), conflict_marker);
    if (has_marker(a, unknown_marker)) return b;
    if (has_marker(b, unknown_marker)) return a;
    if (a.ndim() != b.ndim()) return marked_element(a.get_type(), conflict_marker);
    if (!a.dynamic() && !b.dynamic() && a.lens() == b.lens()) return a.as_standard();
    auto da = a.to_dynamic_dims();
    auto db = b.to_dynamic_dims();
    std::vector<dynamic_dimension> dims;
    for (std::size_t i = 0; i < da.size(); ++i) {
        if (da[i] == db[i]) {
            dims.push_back(da[i]);
            continue;
        }
        // Differing sizes: anything. Tight bounds would make loops whose carried
        // values grow take one re-parse per iteration to reach a fixed point.
        dims.push_back({0, dynamic_dimension::unbounded, {}});
    }
    return shape::make_dynamic(a.get_type(), dims);
}
}  // namespace

shape unknown_element(type t) { return marked_element(t, unknown_marker); }

bool is_unknown_element(const shape& s) { return has_marker(s, unknown_marker) || has_marker(s, conflict_marker); }

shape merge_shapes(const shape& a, const shape& b, const std::string& what) {
    if (same_kind(a, b)) {
        switch (a.get_kind()) {
            case shape::kind::tensor: return merge_tensors(a, b, what);
            case shape::kind::sequence:
                return shape::sequence(merge_shapes(a.sub_shapes()[0], b.sub_shapes()[0], what));
            case shape::kind::optional:
                return shape::optional(merge_shapes(a.sub_shapes()[0], b.sub_shapes()[0], what));
            case shape::kind::tuple: {
                if (a.sub_shapes().size() != b.sub_shapes().size())
                    throw_error(error_code::shape, what + ": tuples of different sizes");
                std::vector<shape> subs;
                for (std::size_t i = 0; i < a.sub_shapes().size(); ++i)
                    subs.push_back(merge_shapes(a.sub_shapes()[i], b.sub_shapes()[i], what));
                return shape::tuple(subs);
            }
        }
    }
    // optional(X) and a plain X (a loop that starts with an optional and carries its
    // content afterwards).
    if (a.is_optional() && !b.is_tuple()) return shape::optional(merge_shapes(a.sub_shapes()[0], b, what));
    if (b.is_optional() && !a.is_tuple()) return shape::optional(merge_shapes(a, b.sub_shapes()[0], what));
    throw_error(error_code::shape, what + ": a " + a.to_string() + " and a " + b.to_string() + " cannot be merged");
}

shape runtime_shape(const argument& a) {
    const auto& s = a.get_shape();
    switch (s.get_kind()) {
        case shape::kind::tensor: return s.dynamic() ? s : s.as_standard();
        case shape::kind::sequence: {
            if (a.elements().empty()) return s;
            shape e = runtime_shape(a.elements()[0]);
            for (std::size_t i = 1; i < a.elements().size(); ++i)
                e = merge_shapes(e, runtime_shape(a.elements()[i]), "sequence");
            return shape::sequence(e);
        }
        case shape::kind::optional:
            return a.elements().empty() ? s : shape::optional(runtime_shape(a.elements()[0]));
        case shape::kind::tuple: {
            std::vector<shape> subs;
            for (auto& e : a.elements()) subs.push_back(runtime_shape(e));
            return shape::tuple(subs);
        }
    }
    return s;
}

argument make_sequence_of(std::vector<argument> items, const shape& fallback) {
    if (items.empty()) return argument::make_sequence(fallback, {});
    shape e = runtime_shape(items[0]);
    for (std::size_t i = 1; i < items.size(); ++i) e = merge_shapes(e, runtime_shape(items[i]), "sequence");
    return argument::make_sequence(e, std::move(items));
}

bool fits_shape(const shape& declared, const shape& actual) {
    if (declared.is_optional() && !actual.is_optional()) return fits_shape(declared.sub_shapes()[0], actual);
    if (!same_kind(declared, actual)) return false;
    if (!declared.is_tensor()) {
        const auto& ds = declared.sub_shapes();
        const auto& as = actual.sub_shapes();
        if (ds.size() != as.size()) return false;
        for (std::size_t i = 0; i < ds.size(); ++i)
            if (!fits_shape(ds[i], as[i])) return false;
        return true;
    }
    if (declared.get_type() != actual.get_type()) return false;
    if (is_unknown_element(declared) || is_unknown_element(actual)) return true;
    if (declared.ndim() != actual.ndim()) return false;
    auto dd = declared.to_dynamic_dims();
    auto ad = actual.to_dynamic_dims();
    for (std::size_t i = 0; i < dd.size(); ++i)
        if (ad[i].min < dd[i].min || ad[i].max > dd[i].max) return false;
    return true;
}

namespace {
void collect_ranges(const argument& a, std::vector<std::pair<const char*, const char*>>& out) {
    if (a.get_shape().is_tensor()) {
        if (a.data() != nullptr && !a.get_shape().dynamic() && a.get_shape().elements() > 0) {
            const char* lo = a.data();
            out.emplace_back(lo, lo + a.get_shape().bytes());
        }
        return;
    }
    for (auto& e : a.elements()) collect_ranges(e, out);
}

argument detach_one(const argument& r, const std::vector<std::pair<const char*, const char*>>& ranges) {
    const auto& s = r.get_shape();
    if (s.is_tensor()) {
        const char* p = r.data();
        if (p == nullptr || s.dynamic()) return r;
        for (auto& [lo, hi] : ranges)
            if (p >= lo && p < hi) return r.copy();
        return r.contiguous();
    }
    std::vector<argument> subs;
    for (auto& e : r.elements()) subs.push_back(detach_one(e, ranges));
    switch (s.get_kind()) {
        case shape::kind::tuple: return argument::make_tuple(std::move(subs));
        case shape::kind::sequence: return argument::make_sequence(s.sub_shapes()[0], std::move(subs));
        case shape::kind::optional:
            return argument::make_optional(s.sub_shapes()[0],
                                           subs.empty() ? std::nullopt : std::optional<argument>(subs[0]));
        default: return r;
    }
}
}  // namespace

argument detach(const argument& result, const std::vector<argument>& inputs) {
    std::vector<std::pair<const char*, const char*>> ranges;
    for (auto& a : inputs) collect_ranges(a, ranges);
    return detach_one(result, ranges);
}

std::vector<argument> run_body(const run_module_fn& run, module_ref body, param_map params) {
    if (!run) throw_error(error_code::runtime, "control flow: no way to run sub-module " + body->name());
    auto scratch = body->get_parameter(builtin::scratch_parameter);
    if (scratch != body->end() && params.count(builtin::scratch_parameter) == 0)
        params[builtin::scratch_parameter] = argument(scratch->get_shape());
    return run(body, params);
}

argument scalar_int64(std::int64_t v) {
    argument a{shape(type::int64)};
    *a.data_as<std::int64_t>() = v;
    return a;
}

argument scalar_bool(bool v) {
    argument a{shape(type::bool_)};
    *a.data_as<bool>() = v;
    return a;
}

bool read_bool(const argument& a, const std::string& what) {
    const auto& s = a.get_shape();
    if (!s.is_tensor() || s.dynamic() || s.elements() != 1)
        throw_error(error_code::shape, what + " must hold one value, got " + s.to_string());
    return a.get_double(0) != 0.0;
}

std::int64_t read_int64(const argument& a, const std::string& what) {
    const auto& s = a.get_shape();
    if (!s.is_tensor() || s.dynamic() || s.elements() != 1)
        throw_error(error_code::shape, what + " must hold one value, got " + s.to_string());
    if (!is_integer(s.get_type()))
        throw_error(error_code::type, what + " must be an integer, got " + std::string(type_name(s.get_type())));
    return a.get_int64(0);
}

}  // namespace kiln::op
