#include <kiln/errors.hpp>
#include <kiln/operation.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>

namespace kiln {

namespace {
struct null_op {
    std::string name() const { return "@null"; }
    shape compute_shape(const std::vector<shape>&) const { return {}; }
};

std::map<std::string, std::function<operation()>>& registry() {
    static std::map<std::string, std::function<operation()>> r;
    return r;
}
std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}
}  // namespace

void throw_no_compute(const std::string& op_name) {
    throw_error(error_code::unsupported, "operation " + op_name + " cannot be computed on this target (no kernel)");
}

void throw_bad_op_cast(const std::string& op_name, const char* wanted) {
    throw_error(error_code::runtime, "operation " + op_name + " is not a " + wanted);
}

operation::operation() : self_(std::make_shared<model<null_op>>(null_op{})) {}

void operation::ensure_unique() {
    if (self_.use_count() > 1) self_ = self_->clone();
}

operation operation::with_value(const value& v) const {
    operation r = *this;
    r.self_ = self_->clone();
    r.self_->from_value(v);
    return r;
}

shape operation::compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    bool dyn = std::any_of(inputs.begin(), inputs.end(), [](const shape& s) { return s.is_tensor() && s.dynamic(); });
    if (!dyn || traits().handles_dynamic) return self_->compute_shape(inputs, mods);
    return compute_shape_dynamic(inputs, mods);
}

// Shape inference over dynamic dimensions without every op having to implement it:
// evaluate the op's static compute_shape at a few concrete sizes of the dynamic
// dimensions. Output dims that agree at every point are static; the others are
// dynamic, bounded by the results at the inputs' minimum and maximum sizes.
shape operation::compute_shape_dynamic(const std::vector<shape>& inputs,
                                       const std::vector<module_ref>& mods) const {
    auto instantiate = [&](auto pick) {
        std::vector<shape> out;
        for (auto& s : inputs) {
            if (!s.is_tensor() || !s.dynamic()) {
                out.push_back(s);
                continue;
            }
            std::vector<std::size_t> lens;
            for (auto& d : s.dyn_dims()) lens.push_back(d.is_fixed() ? d.min : pick(d));
            out.emplace_back(s.get_type(), lens);
        }
        return out;
    };
    auto base = [](const dynamic_dimension& d) { return std::max<std::size_t>(d.min, 1); };
    auto second = [&](const dynamic_dimension& d) {
        auto b = base(d);
        return b + 1 <= d.max ? b + 1 : b;
    };
    auto third = [&](const dynamic_dimension& d) {
        auto b = base(d);
        return b + 5 <= d.max ? b + 5 : b;
    };
    std::vector<shape> results;
    std::string first_error;
    for (int which = 0; which < 3; ++which) {
        try {
            auto in = which == 0 ? instantiate(base) : which == 1 ? instantiate(second) : instantiate(third);
            results.push_back(self_->compute_shape(in, mods));
        } catch (const error& e) {
            if (first_error.empty()) first_error = e.what();
        }
    }
    if (results.empty())
        throw_error(error_code::shape, name() + ": cannot infer a shape for dynamic inputs: " + first_error);
    const shape& r0 = results.front();
    if (!r0.is_tensor()) return r0;
    for (auto& r : results)
        if (!r.is_tensor() || r.ndim() != r0.ndim() || r.get_type() != r0.get_type())
            throw_error(error_code::unsupported,
                        name() + ": output rank or type depends on dynamic input dimensions");
    std::vector<dynamic_dimension> dims;
    bool any_dyn = false;
    for (std::size_t i = 0; i < r0.ndim(); ++i) {
        auto d0 = r0.lens()[i];
        bool same = std::all_of(results.begin(), results.end(), [&](const shape& r) { return r.lens()[i] == d0; });
        if (same) {
            dims.push_back({d0, d0, {}});
        } else {
            any_dyn = true;
            dims.push_back({0, dynamic_dimension::unbounded, {}});
        }
    }
    if (!any_dyn) return r0;
    // Tighten the bounds where the op accepts the extreme sizes.
    auto try_at = [&](auto pick) -> std::optional<shape> {
        try {
            return self_->compute_shape(instantiate(pick), mods);
        } catch (const error&) {
            return std::nullopt;
        }
    };
    bool bounded = std::all_of(inputs.begin(), inputs.end(), [](const shape& s) {
        if (!s.is_tensor() || !s.dynamic()) return true;
        return std::all_of(s.dyn_dims().begin(), s.dyn_dims().end(),
                           [](auto& d) { return d.max != dynamic_dimension::unbounded && d.max < (1u << 24); });
    });
    auto lo = try_at([](const dynamic_dimension& d) { return d.min; });
    auto hi = bounded ? try_at([](const dynamic_dimension& d) { return d.max; }) : std::nullopt;
    for (std::size_t i = 0; i < dims.size(); ++i) {
        if (dims[i].is_fixed()) continue;
        if (lo && lo->ndim() == dims.size()) dims[i].min = lo->lens()[i];
        if (hi && hi->ndim() == dims.size()) dims[i].max = std::max(hi->lens()[i], dims[i].min);
    }
    return shape::make_dynamic(r0.get_type(), dims);
}

argument operation::compute(context& ctx, const shape& output, const std::vector<argument>& args,
                            const std::vector<module_ref>& mods, const run_module_fn& run) const {
    return self_->compute(ctx, output, args, mods, run);
}

std::string operation::to_string() const {
    std::ostringstream ss;
    ss << *this;
    return ss.str();
}

std::size_t operation::hash() const {
    return std::hash<std::string>{}(name()) ^ (to_value().hash() * 31);
}

bool operator==(const operation& a, const operation& b) {
    if (a.self_ == b.self_) return true;
    return a.name() == b.name() && a.to_value() == b.to_value();
}

std::ostream& operator<<(std::ostream& os, const operation& op) {
    os << op.name();
    auto v = op.to_value();
    if (v.is_object() && v.size() > 0) {
        os << "{";
        bool first = true;
        for (auto& [k, x] : v.get_object()) {
            os << (first ? "" : ", ") << k << "=" << x;
            first = false;
        }
        os << "}";
    }
    return os;
}

value operation_to_value(const operation& op) {
    return value{{"name", op.name()}, {"attributes", op.to_value()}};
}

operation operation_from_value(const value& v) { return make_op(v.at("name").get_string(), v.at("attributes")); }

void register_op_factory(const std::string& name, std::function<operation()> make) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[name] = std::move(make);
}

bool has_op(const std::string& name) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    return registry().count(name) > 0;
}

operation make_op(const std::string& name, const value& attributes) {
    std::function<operation()> make;
    {
        std::lock_guard<std::mutex> lock(registry_mutex());
        auto it = registry().find(name);
        if (it == registry().end()) throw_error(error_code::unsupported, "unknown operation '" + name + "'");
        make = it->second;
    }
    auto op = make();
    if (attributes.is_object() && attributes.size() > 0) return op.with_value(attributes);
    return op;
}

std::vector<std::string> get_operator_names() {
    std::lock_guard<std::mutex> lock(registry_mutex());
    std::vector<std::string> names;
    for (auto& [k, v] : registry()) names.push_back(k);
    return names;
}

}  // namespace kiln
