#include "core/dynamic_shape_inference.hpp"

#include <kiln/context.hpp>
#include <kiln/errors.hpp>
#include <kiln/literal.hpp>
#include <kiln/operation.hpp>
#include <kiln/reflect.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>
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

namespace {
// An op that passes an input's shape through (neg, identity, ...) would pass its values
// too, which its own values need not be: values come only from the sampling below.
shape without_values(shape s) { return s.has_values() ? s.with_values({}) : s; }
}  // namespace

namespace {
// An input's value when its shape carries it whole and every element is a number.
std::optional<argument> constant_value(const shape& s) {
    if (detail::empty_int(s)) return literal(shape(s.get_type(), s.lens()), std::vector<std::int64_t>{}).get_argument();
    if (!s.is_tensor() || !s.has_values()) return std::nullopt;
    std::vector<std::int64_t> v;
    for (auto& e : s.values()) {
        if (!detail::is_number(e)) return std::nullopt;
        v.push_back(std::stoll(e));
    }
    return literal(shape(s.get_type(), s.lens()), v).get_argument();
}
}  // namespace

// The values of a small integer result computed from its inputs' (constant) values;
// `r` as it is when the op cannot or may not run at compile time.
shape operation::with_computed_values(const shape& r, const std::vector<shape>& inputs,
                                      const std::vector<module_ref>& mods) const {
    auto t = traits();
    // A dynamic result (Range, ConstantOfShape of known sizes) is computed for its shape.
    if (!(detail::small_int(r) || (r.is_tensor() && r.dynamic())) || !mods.empty() || !self_->has_compute() ||
        t.nondeterministic || t.side_effects || t.builtin)
        return r;
    try {
        std::vector<argument> args;
        double size = 1;
        for (auto& s : inputs) {
            std::vector<std::int64_t> v;
            for (auto& e : s.values()) {
                v.push_back(std::stoll(e));
                size *= std::max<double>(1, std::fabs(static_cast<double>(v.back())));
            }
            args.push_back(literal(shape(s.get_type(), s.lens()), v).get_argument());
        }
        // Not worth materializing at compile time (nor safe: a size from a hostile model).
        if (r.dynamic() && size > double(1 << 20)) return r;
        host_context ctx;
        auto a = self_->compute(ctx, r, args, {}, {});
        // A static result keeps the op's own layout (a broadcast is a stride-0 view).
        auto out = r.dynamic() ? a.get_shape().as_standard() : r;
        if (!detail::small_int(out)) return out;
        std::vector<std::string> values;
        for (std::size_t i = 0; i < out.elements(); ++i) values.push_back(std::to_string(a.get_int64(i)));
        return out.with_values(std::move(values));
    } catch (const std::exception&) {
        return r;  // left for run time, which reports it in context
    }
}

shape operation::compute_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    bool dyn = std::any_of(inputs.begin(), inputs.end(), [](const shape& s) { return s.is_tensor() && s.dynamic(); });
    bool sym = detail::has_symbolic_values(inputs);
    // Shape arithmetic over constants keeps its values, so that Concat(Unsqueeze(batch),
    // Unsqueeze(4)) still knows its second value.
    bool all_valued = !inputs.empty() && std::all_of(inputs.begin(), inputs.end(), [](const shape& s) {
        if (detail::empty_int(s)) return true;
        return s.is_tensor() && s.has_values() && std::none_of(s.values().begin(), s.values().end(),
                                                               [](const std::string& v) { return v.empty(); });
    });
    if (!dyn && !sym) {
        // Static inputs: an op shaped by an input's values (Reshape to a computed shape, once
        // the dims it was computed from are known) gets them, so that a specialized program's
        // shapes are static before simplify_dynamic_ops rewrites the op.
        shape r;
        if (self_->has_compute_shape_values() && mods.empty()) {
            std::vector<std::optional<argument>> known;
            bool any_known = false;
            for (auto& s : inputs) {
                known.push_back(constant_value(s));
                any_known = any_known || known.back().has_value();
            }
            std::optional<shape> h;
            try {
                h = self_->compute_shape_values(inputs, known);
            } catch (const error&) {
                // Known values the op refuses (Reshape of 6 elements to {4}) are left for run
                // time, which reports them in context, as when they were not known.
                h = self_->compute_shape(inputs, mods);
            }
            // Values the op gives itself (shape_of: its input's dims) are its own; with valued
            // inputs they may be a passed-through input's, so they are computed below instead.
            r = any_known ? without_values(*h) : *h;
        } else {
            r = without_values(self_->compute_shape(inputs, mods));
        }
        return all_valued ? with_computed_values(r, inputs, mods) : r;
    }
    auto t = traits();
    bool hook = self_->has_compute_shape_values();
    if (t.handles_dynamic && !hook && !sym) return without_values(self_->compute_shape(inputs, mods));
    return compute_shape_dynamic(inputs, mods);
}

shape operation::compute_run_shape(const std::vector<shape>& inputs, const std::vector<module_ref>& mods) const {
    return self_->compute_shape(inputs, mods);
}

// See dynamic_shape_inference.hpp: the op's static compute_shape at consistent sizes of
// the inputs' named dims, and at concrete values of their shape arithmetic.
shape operation::compute_shape_dynamic(const std::vector<shape>& inputs,
                                       const std::vector<module_ref>& mods) const {
    auto t = traits();
    detail::shape_functions f;
    f.static_shape = [&](const std::vector<shape>& in) { return self_->compute_shape(in, mods); };
    if (self_->has_compute_shape_values())
        f.shape_from_values = [&](const std::vector<shape>& in, const std::vector<std::optional<argument>>& v) {
            return self_->compute_shape_values(in, v);
        };
    if (self_->has_compute() && !t.nondeterministic && !t.side_effects && !t.builtin && mods.empty())
        f.compute = [&](const shape& out, const std::vector<argument>& args) {
            host_context ctx;
            return self_->compute(ctx, out, args, {}, {});
        };
    try {
        if (auto r = detail::infer_dynamic_shape(name(), inputs, f)) return *r;
    } catch (const error&) {
        // Ops that understand dynamic shapes themselves say what they can.
        if (!t.handles_dynamic) throw;
    }
    // The result depends on values known only at run time (or sampling could not place
    // it): what the op itself says of these inputs.
    return without_values(self_->compute_shape(inputs, mods));
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

operation make_op_checked(const std::string& name, const value& attributes) {
    if (!attributes.is_null() && !attributes.is_object())
        throw_error(error_code::invalid_argument, "attributes of '" + name + "' must be an object of name: value");
    operation op = make_op(name, attributes);
    if (attributes.is_null()) return op;
    const value known = operation_to_value(op).at("attributes");
    for (const auto& [key, v] : attributes.get_object())
        if (!known.contains(key))
            throw_error(error_code::invalid_argument, "operation '" + name + "' has no attribute '" + key + "'");
    return op;
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
