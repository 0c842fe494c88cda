#include "passes/fuse_pointwise.hpp"

#include "passes/rewrite_utils.hpp"

#include "ops/fused.hpp"
#include "ops/reduce.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>

namespace kiln {

namespace {

bool static_tensor(const shape& s) { return s.is_tensor() && !s.dynamic(); }

// lens broadcast (right-aligned) to `domain`.
bool fits(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& domain) {
    if (lens.size() > domain.size()) return false;
    const std::size_t shift = domain.size() - lens.size();
    for (std::size_t i = 0; i < lens.size(); ++i)
        if (lens[i] != 1 && lens[i] != domain[i + shift]) return false;
    return true;
}

// dims broadcast (right-aligned) to `domain`: each a fixed 1 or equal to the domain's
// (two dynamic dims equal as descriptions; a kernel checks the sizes when it runs).
bool fits(const std::vector<dynamic_dimension>& dims, const std::vector<dynamic_dimension>& domain) {
    if (dims.size() > domain.size()) return false;
    const std::size_t shift = domain.size() - dims.size();
    for (std::size_t i = 0; i < dims.size(); ++i)
        if (!(dims[i].is_fixed() && dims[i].min == 1) && !(dims[i] == domain[i + shift])) return false;
    return true;
}

bool dynamic_tensor(const shape& s) { return s.is_tensor() && s.dynamic(); }

struct group {
    instruction_ref root;
    bool dynamic = false;                            // over dynamic_domain, elementwise only
    std::vector<dynamic_dimension> dynamic_domain;
    std::vector<std::size_t> domain;
    std::vector<std::size_t> axes;  // reduced axes of the domain; empty while the group has no reduction
    std::vector<instruction_ref> members;
};

bool is_candidate(instruction_ref ins, const fuse_pointwise& opts, const std::unordered_set<const instruction*>& reserved) {
    if (ins->is_param() || ins->is_literal() || ins->is_return()) return false;
    const auto& op = ins->get_operator();
    if (op.traits().builtin || !ins->module_inputs().empty() || reserved.count(&*ins)) return false;
    if (dynamic_tensor(ins->get_shape())) {
        const bool reduction = is_fusible_dynamic_reduction(ins);
        if (!opts.dynamic || (reduction && !opts.reductions) || (!reduction && !op.traits().pointwise)) return false;
        for (auto in : ins->inputs())
            if (!in->get_shape().is_tensor()) return false;
        return opts.supported ? opts.supported(ins) : ins->get_shape().get_type() == type::float32;
    }
    if (!static_tensor(ins->get_shape()) || ins->get_shape().elements() == 0) return false;
    for (auto in : ins->inputs())
        if (!static_tensor(in->get_shape())) return false;
    const bool reduction = is_fusible_reduction(ins);
    if (reduction && !opts.reductions) return false;
    if (!reduction && !op.traits().pointwise) return false;
    if (opts.supported) return opts.supported(ins);
    const type t = ins->get_shape().get_type();
    return t == type::float32 || t == type::float64 || t == type::float16 || t == type::bfloat16;
}

// The domain of a group rooted at `root`.
group start_group(instruction_ref root) {
    group g;
    g.root = root;
    g.members.push_back(root);
    if (dynamic_tensor(root->get_shape())) {
        g.dynamic = true;
        if (is_fusible_dynamic_reduction(root)) {
            g.dynamic_domain = root->inputs()[0]->get_shape().to_dynamic_dims();
            g.axes = reduction_axes(root->get_operator(), g.dynamic_domain.size());
        } else {
            g.dynamic_domain = root->get_shape().to_dynamic_dims();
        }
    } else if (is_fusible_reduction(root)) {
        g.domain = root->inputs()[0]->get_shape().lens();
        g.axes = reduction_axes(root->get_operator(), g.domain.size());
    } else {
        g.domain = root->get_shape().lens();
    }
    return g;
}

// The dims of a shape as a group compares them: lens in a static group, dynamic
// dimensions in a dynamic one (fixed 1 stands for a broadcast dim in both).
std::vector<std::size_t> dims_of(const shape& s, const std::size_t*) { return s.lens(); }
std::vector<dynamic_dimension> dims_of(const shape& s, const dynamic_dimension*) { return s.to_dynamic_dims(); }
std::size_t unit_dim(const std::size_t*) { return 1; }
dynamic_dimension unit_dim(const dynamic_dimension*) { return {1, 1, {}, {}}; }

// Adds `ins` (a candidate, a reduction when `reduction`) to g over `domain` when that
// keeps the group legal (see the header).
template <class Dim>
bool join(group& g, std::vector<Dim>& domain, instruction_ref ins, bool reduction) {
    const Dim* tag = nullptr;
    if (!reduction) {
        if (!fits(dims_of(ins->get_shape(), tag), domain)) return false;
        g.members.push_back(ins);
        return true;
    }
    const auto in_dims = dims_of(ins->inputs()[0]->get_shape(), tag);
    const auto axes = reduction_axes(ins->get_operator(), in_dims.size());
    if (!g.axes.empty()) {
        if (in_dims != domain || axes != g.axes) return false;
    } else if (in_dims != domain) {
        // The group so far computes a per-row value (e.g. rsqrt(var + eps)): its domain
        // becomes this reduction's input when the root has exactly the reduced lens.
        auto row = in_dims;
        for (auto a : axes) row[a] = unit_dim(tag);
        if (domain != row || dims_of(g.root->get_shape(), tag) != row) return false;
        for (auto m : g.members)
            if (!fits(dims_of(m->get_shape(), tag), in_dims)) return false;
        domain = in_dims;
    }
    g.axes = axes;
    g.members.push_back(ins);
    return true;
}

bool try_join(group& g, instruction_ref ins) {
    if (g.dynamic) {
        // A reduction joins only as one over the group's trailing dynamic dims (a static
        // reduction read by a dynamic group stays apart).
        const bool reduction = is_fusible_dynamic_reduction(ins);
        if (!reduction && ins->get_operator().traits().reduction) return false;
        return join(g, g.dynamic_domain, ins, reduction);
    }
    if (dynamic_tensor(ins->get_shape())) return false;
    const bool reduction = is_fusible_reduction(ins);
    if (reduction && !reduction_keepdims(ins->get_operator())) return false;
    return join(g, g.domain, ins, reduction);
}

void rewrite_group(module& m, group& g, const std::unordered_map<const instruction*, std::size_t>& pos) {
    std::sort(g.members.begin(), g.members.end(),
              [&](instruction_ref a, instruction_ref b) { return pos.at(&*a) < pos.at(&*b); });
    std::unordered_set<const instruction*> in_group;
    for (auto mem : g.members) in_group.insert(&*mem);
    std::unordered_map<const instruction*, std::int64_t> node_of;  // member -> body node
    op::fused f;
    std::vector<instruction_ref> inputs;
    std::unordered_map<const instruction*, std::int64_t> input_arg;
    // Scalar literals first (body constants), then the members in order.
    for (auto mem : g.members)
        for (auto in : mem->inputs())
            if (!in_group.count(&*in) && in->is_literal() && in->get_shape().elements() == 1 && !input_arg.count(&*in)) {
                input_arg[&*in] = static_cast<std::int64_t>(f.nodes.size());
                f.nodes.push_back({op::fused_literal{in->get_literal()}, {}});
            }
    for (auto mem : g.members) {
        op::fused_node n{mem->get_operator(), {}};
        for (auto in : mem->inputs()) {
            if (auto it = node_of.find(&*in); it != node_of.end()) {
                n.args.push_back(it->second);
            } else if (auto jt = input_arg.find(&*in); jt != input_arg.end()) {
                n.args.push_back(jt->second);
            } else {
                const auto a = op::fused_input_arg(inputs.size());
                input_arg[&*in] = a;
                inputs.push_back(in);
                n.args.push_back(a);
            }
        }
        node_of[&*mem] = static_cast<std::int64_t>(f.nodes.size());
        f.nodes.push_back(std::move(n));
    }
    m.replace_instruction(g.root, f, inputs);
    for (auto it = g.members.rbegin(); it != g.members.rend(); ++it)
        if (*it != g.root && (*it)->outputs().empty()) m.remove_instruction(*it);
}

}  // namespace

bool is_fusible_reduction(instruction_ref ins) {
    // Every reduction but log_sum_exp, which shifts by the row's max before it sums (a
    // pass of its own that the fused kernels do not make).
    if (!ins->get_operator().traits().reduction || rewrite::is<op::reduce_log_sum_exp>(ins)) return false;
    if (ins->inputs().size() != 1) return false;
    const auto& s = ins->inputs()[0]->get_shape();
    if (!static_tensor(s)) return false;
    return !reduction_axes(ins->get_operator(), s.ndim()).empty();
}

bool is_fusible_dynamic_reduction(instruction_ref ins) {
    if (!ins->get_operator().traits().reduction || rewrite::is<op::reduce_log_sum_exp>(ins)) return false;
    if (ins->inputs().size() != 1 || !reduction_keepdims(ins->get_operator())) return false;
    const auto& s = ins->inputs()[0]->get_shape();
    if (!s.is_tensor() || !s.dynamic()) return false;
    const auto axes = reduction_axes(ins->get_operator(), s.ndim());
    if (axes.empty()) return false;
    for (std::size_t i = 0; i < axes.size(); ++i)
        if (axes[i] != s.ndim() - axes.size() + i) return false;
    return true;
}

std::vector<std::size_t> reduction_axes(const operation& op, std::size_t rank) {
    const auto v = op.to_value();
    std::vector<std::size_t> axes;
    if (const auto* a = v.find("axes"); a && a->is_array()) {
        for (const auto& e : a->get_array()) {
            auto x = e.get_int64();
            if (x < 0) x += static_cast<std::int64_t>(rank);
            if (x < 0 || x >= static_cast<std::int64_t>(rank)) return {};
            axes.push_back(static_cast<std::size_t>(x));
        }
    }
    std::sort(axes.begin(), axes.end());
    axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
    return axes;
}

bool reduction_keepdims(const operation& op) {
    const auto v = op.to_value();
    const auto* k = v.find("keepdims");
    return !k || !k->is_bool() || k->get_bool();
}

void fuse_pointwise::apply(module& m) const {
    const auto reserved_set = reserved ? reserved(m) : std::unordered_set<const instruction*>{};
    std::unordered_map<const instruction*, std::size_t> pos;
    std::size_t p = 0;
    for (auto it = m.begin(); it != m.end(); ++it) pos[&*it] = p++;

    std::vector<group> groups;
    std::unordered_map<const instruction*, std::size_t> group_of;
    for (auto it = m.end(); it != m.begin();) {
        --it;
        if (!is_candidate(it, *this, reserved_set)) continue;
        // The one group all users belong to, if any.
        std::optional<std::size_t> target;
        bool all_in_one = !it->outputs().empty();
        for (auto u : it->outputs()) {
            auto gi = group_of.find(&*u);
            if (gi == group_of.end() || (target && *target != gi->second)) {
                all_in_one = false;
                break;
            }
            target = gi->second;
        }
        if (all_in_one && target && try_join(groups[*target], it)) {
            group_of[&*it] = *target;
            continue;
        }
        group_of[&*it] = groups.size();
        groups.push_back(start_group(it));
    }
    for (auto& g : groups)
        if (g.members.size() >= std::max<std::size_t>(min_size, 1)) rewrite_group(m, g, pos);
}

}  // namespace kiln
