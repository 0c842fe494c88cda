#include "codegen/plan.hpp"

#include "ops/pointwise_binary.hpp"
#include "passes/fuse_pointwise.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <set>

namespace kiln::codegen {

namespace {

const std::set<std::string>& float_unary() {
    static const std::set<std::string> s = {
        "exp",   "log",   "sqrt",  "reciprocal", "sin",          "cos",        "tan",        "asin",
        "acos",  "atan",  "sinh",  "cosh",       "asinh",        "acosh",      "atanh",      "tanh",
        "floor", "ceil",  "round", "sigmoid",    "softplus",     "softsign",   "hard_swish", "mish",
        "abs",   "neg",   "sign",  "erf",        "relu",         "leaky_relu", "elu",        "selu",
        "celu",  "gelu",  "swish", "shrink",     "hard_sigmoid", "thresholded_relu"};
    return s;
}
const std::set<std::string>& float_binary() {
    static const std::set<std::string> s = {"add", "sub", "mul", "div", "mod", "max", "min", "prelu", "swiglu"};
    return s;
}
const std::set<std::string>& comparisons() {
    static const std::set<std::string> s = {"equal", "less", "greater", "less_or_equal", "greater_or_equal"};
    return s;
}
const std::set<std::string>& logical_binary() {
    static const std::set<std::string> s = {"logical_and", "logical_or", "logical_xor"};
    return s;
}

bool is_convertible_source(type t) {
    switch (t) {
        case type::bool_:
        case type::int8:
        case type::int16:
        case type::int32:
        case type::int64:
        case type::uint8:
        case type::uint16:
        case type::uint32:
        case type::uint64:
        case type::float64: return true;
        default: return false;
    }
}

bool all_are(const std::vector<type>& ts, type t) {
    return std::all_of(ts.begin(), ts.end(), [&](type x) { return x == t; });
}

[[noreturn]] void unsupported(std::size_t k, const std::string& name, const std::string& why) {
    throw_error(error_code::unsupported, "fused kernel: node " + std::to_string(k) + " (" + name + ") " + why);
}

// Strides of `s` seen over `domain` (right-aligned; 0 where s is broadcast).
std::vector<std::int64_t> strides_over(const shape& s, const std::vector<std::size_t>& domain) {
    std::vector<std::int64_t> out(domain.size(), 0);
    const auto& lens = s.lens();
    const auto& st = s.strides();
    const std::size_t shift = domain.size() - lens.size();
    for (std::size_t i = 0; i < lens.size(); ++i)
        if (lens[i] != 1) out[i + shift] = static_cast<std::int64_t>(st[i]);
    return out;
}

// Drops length-1 dims and merges neighbours all strides allow; keeps at least one dim.
void collapse(std::vector<std::size_t>& lens, std::vector<std::vector<std::int64_t>*> strides) {
    std::vector<std::size_t> l;
    std::vector<std::vector<std::int64_t>> s(strides.size());
    for (std::size_t d = 0; d < lens.size(); ++d) {
        if (lens[d] == 1) continue;
        bool merge = !l.empty();
        for (std::size_t k = 0; merge && k < strides.size(); ++k)
            merge = s[k].back() == (*strides[k])[d] * static_cast<std::int64_t>(lens[d]);
        if (merge) {
            l.back() *= lens[d];
            for (std::size_t k = 0; k < strides.size(); ++k) s[k].back() = (*strides[k])[d];
        } else {
            l.push_back(lens[d]);
            for (std::size_t k = 0; k < strides.size(); ++k) s[k].push_back((*strides[k])[d]);
        }
    }
    if (l.empty()) {
        l.push_back(1);
        for (auto& v : s) v.push_back(0);
    }
    lens = l;
    for (std::size_t k = 0; k < strides.size(); ++k) *strides[k] = s[k];
}

bool fits(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& domain) {
    if (lens.size() > domain.size()) return false;
    const std::size_t shift = domain.size() - lens.size();
    for (std::size_t i = 0; i < lens.size(); ++i)
        if (lens[i] != 1 && lens[i] != domain[i + shift]) return false;
    return true;
}

}  // namespace

bool access::row_level() const {
    return std::all_of(inner.begin(), inner.end(), [](std::int64_t s) { return s == 0; });
}
bool access::invariant() const {
    return row_level() && std::all_of(outer.begin(), outer.end(), [](std::int64_t s) { return s == 0; });
}

std::size_t plan::outer_size() const {
    std::size_t n = 1;
    for (auto l : outer_lens) n *= l;
    return n;
}
std::size_t plan::inner_size() const {
    std::size_t n = 1;
    for (auto l : inner_lens) n *= l;
    return n;
}

std::string reduction_kind(const std::string& op_name) {
    static const std::set<std::string> kinds = {"sum", "mean", "max", "min", "prod", "l1", "l2", "sum_square", "log_sum"};
    if (op_name.rfind("reduce_", 0) != 0) return {};
    auto k = op_name.substr(7);
    return kinds.count(k) ? k : std::string{};
}

bool is_float16(type t) { return t == type::float16 || t == type::bfloat16; }

namespace {

// Float types an op computes in: float32, or a 16-bit float computed in float and rounded.
bool floating(type t) { return t == type::float32 || is_float16(t); }
bool all_floating_as(const std::vector<type>& in, type result) {
    return floating(result) && all_are(in, result);
}

}  // namespace

bool kernel_supports(const std::string& n, const value& attrs, const std::vector<type>& in, type result) {
    const type f = type::float32, b = type::bool_;
    if (!reduction_kind(n).empty()) return in.size() == 1 && in[0] == f && result == f;
    if (float_unary().count(n)) return in.size() == 1 && all_floating_as(in, result);
    if (n == "isnan" || n == "isinf") return in.size() == 1 && floating(in[0]) && result == b;
    if (n == "logical_not") return in.size() == 1 && in[0] == b && result == b;
    if (float_binary().count(n)) return in.size() == 2 && all_floating_as(in, result);
    if (n == "pow") return in.size() == 2 && floating(in[0]) && result == in[0];  // the exponent is checked by the caller
    if (comparisons().count(n)) return in.size() == 2 && floating(in[0]) && all_are(in, in[0]) && result == b;
    if (logical_binary().count(n)) return in.size() == 2 && all_are(in, b) && result == b;
    if (n == "clip") return in.size() == 3 && all_floating_as(in, result);
    if (n == "where")
        return in.size() == 3 && in[0] == b && in[1] == in[2] && (floating(in[1]) || in[1] == b) && result == in[1];
    if (n == "convert") {
        if (in.size() != 1) return false;
        const auto* tt = attrs.find("target_type");
        if (!tt || !tt->is_integer()) return false;
        if (result == f) return is_convertible_source(in[0]) || is_float16(in[0]);
        // To 16 bits only from values float holds exactly: one rounding, as the reference's.
        if (is_float16(result)) return floating(in[0]);
        return result == b && floating(in[0]);
    }
    return false;
}

static bool static_tensor(const shape& s) { return s.is_tensor() && !s.dynamic(); }

bool kernel_can_run(instruction_ref ins, bool float16) {
    if (!static_tensor(ins->get_shape()) || ins->get_shape().elements() == 0) return false;
    for (auto x : ins->inputs())
        if (!static_tensor(x->get_shape())) return false;
    return kernel_types_supported(ins, float16);
}

bool kernel_types_supported(instruction_ref ins, bool float16) {
    if (!ins->get_shape().is_tensor()) return false;
    if (!float16 && is_float16(ins->get_shape().get_type())) return false;
    std::vector<type> in;
    for (std::size_t i = 0; i < ins->inputs().size(); ++i) {
        auto x = ins->inputs()[i];
        if (!x->get_shape().is_tensor()) return false;
        type t = x->get_shape().get_type();
        // pow's exponent may be a scalar constant of any numeric type (it becomes a body constant).
        if (ins->get_operator().any_cast<op::pow_op>() && i == 1 && x->is_literal() && x->get_shape().elements() == 1 &&
            t != type::string)
            t = type::float32;
        if (!float16 && is_float16(t)) return false;
        in.push_back(t);
    }
    return kernel_supports(ins->name(), ins->get_operator().to_value(), in, ins->get_shape().get_type());
}

op::fused single_group(instruction_ref ins, std::vector<instruction_ref>& inputs) {
    op::fused f;
    op::fused_node n{ins->get_operator(), {}};
    for (auto in : ins->inputs()) {
        if (in->is_literal() && in->get_shape().elements() == 1) {
            n.args.push_back(static_cast<std::int64_t>(f.nodes.size()));
            f.nodes.push_back({op::fused_literal{in->get_literal()}, {}});
        } else {
            n.args.push_back(op::fused_input_arg(inputs.size()));
            inputs.push_back(in);
        }
    }
    f.nodes.push_back(std::move(n));
    return f;
}

plan make_plan(const op::fused& f, const std::vector<shape>& inputs, const shape& output, bool fast_math) {
    plan p;
    p.fast_math = fast_math;
    const auto shapes = f.node_shapes(inputs);
    const std::size_t nin = inputs.size();
    auto shape_of = [&](std::size_t i) -> const shape& { return i < nin ? inputs[i] : shapes[i - nin]; };
    // Input nodes, then one plan node per body node.
    for (std::size_t i = 0; i < nin; ++i) {
        node n;
        n.kind = node_kind::input;
        n.name = "@input";
        n.input = i;
        n.t = inputs[i].get_type();
        p.nodes.push_back(n);
    }
    std::vector<std::size_t> axes, domain;
    bool root_drops_dims = false;
    for (std::size_t k = 0; k < f.nodes.size(); ++k) {
        const auto& fn = f.nodes[k];
        node n;
        n.op = fn.op;
        n.name = fn.op.name();
        n.t = shapes[k].get_type();
        for (auto a : fn.args) n.args.push_back(a >= 0 ? nin + static_cast<std::size_t>(a) : op::fused_arg_input(a));
        if (n.name == "fused_literal") {
            const auto& lit = fn.op.get<op::fused_literal>().value;
            if (lit.get_shape().elements() != 1 || lit.get_shape().get_type() == type::string)
                unsupported(k, n.name, "is not a numeric scalar");
            n.kind = node_kind::constant;
            n.value = lit.get_argument().get_double(0);
            p.nodes.push_back(n);
            continue;
        }
        std::vector<type> arg_types;
        for (auto a : n.args) arg_types.push_back(p.nodes[a].t);
        const bool const_exponent = n.name == "pow" && n.args.size() == 2 && p.nodes[n.args[1]].kind == node_kind::constant;
        if (const_exponent) arg_types[1] = type::float32;  // a constant exponent of any numeric type
        if (!kernel_supports(n.name, fn.op.to_value(), arg_types, n.t))
            unsupported(k, n.name, "has no kernel for these element types");
        for (auto a : n.args) {
            const auto& an = p.nodes[a];
            const bool other_type = an.t != type::float32 && an.t != type::bool_ && !is_float16(an.t);
            if (other_type && n.name != "convert" && !(const_exponent && a == n.args[1]))
                unsupported(k, n.name, "reads a " + std::string(type_name(an.t)) + " value");
        }
        if (!reduction_kind(n.name).empty()) {
            n.kind = node_kind::reduce;
            const auto& in_lens = shape_of(n.args[0]).lens();
            auto ax = reduction_axes(fn.op, in_lens.size());
            if (ax.empty()) unsupported(k, n.name, "reduces no axis");
            if (!reduction_keepdims(fn.op)) {
                if (k + 1 != f.nodes.size()) unsupported(k, n.name, "drops dims inside the group");
                root_drops_dims = true;
            }
            if (!domain.empty() && (domain != in_lens || axes != ax))
                unsupported(k, n.name, "reduces other lens or axes than the group's other reductions");
            domain = in_lens;
            axes = ax;
        }
        p.nodes.push_back(n);
    }
    p.root = p.nodes.size() - 1;
    p.reduction = !axes.empty();
    const auto& root_lens = shapes.back().lens();
    if (!p.reduction) domain = root_lens;
    if (output.lens() != root_lens || output.get_type() != shapes.back().get_type())
        throw_error(error_code::shape, "fused kernel: output " + output.to_string() + " does not match the group's " +
                                           shapes.back().to_string());
    for (std::size_t k = 0; k < shapes.size(); ++k)
        if (!(root_drops_dims && k + 1 == shapes.size()) && !fits(shapes[k].lens(), domain))
            unsupported(k, p.nodes[nin + k].name, "has lens that do not broadcast to the group's");
    auto row_lens = domain;
    for (auto a : axes) row_lens[a] = 1;
    const bool root_row = p.reduction && (root_drops_dims || root_lens == row_lens);
    if (!root_row && root_lens != domain)
        unsupported(shapes.size() - 1, p.nodes[p.root].name, "gives a result that is neither per element nor per row");

    // Strides over the domain: inputs (broadcast), then the output.
    std::vector<std::vector<std::int64_t>> st;
    for (std::size_t i = 0; i < nin; ++i) {
        if (!fits(inputs[i].lens(), domain))
            throw_error(error_code::unsupported, "fused kernel: input " + std::to_string(i) + " " +
                                                     inputs[i].to_string() + " does not broadcast to the group's lens");
        st.push_back(strides_over(inputs[i], domain));
    }
    std::vector<std::int64_t> out_st(domain.size(), 0);
    if (root_drops_dims) {
        std::size_t j = 0;
        for (std::size_t d = 0; d < domain.size(); ++d)
            if (std::find(axes.begin(), axes.end(), d) == axes.end()) {
                out_st[d] = output.lens()[j] == 1 ? 0 : static_cast<std::int64_t>(output.strides()[j]);
                ++j;
            }
    } else {
        out_st = strides_over(output, domain);
    }
    st.push_back(out_st);
    // Split into outer and inner dims, then collapse each.
    std::vector<std::vector<std::int64_t>> so(st.size()), si(st.size());
    for (std::size_t d = 0; d < domain.size(); ++d) {
        const bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
        (reduced ? p.inner_lens : p.outer_lens).push_back(domain[d]);
        for (std::size_t k = 0; k < st.size(); ++k) (reduced ? si : so)[k].push_back(st[k][d]);
    }
    std::vector<std::vector<std::int64_t>*> po, pi;
    for (std::size_t k = 0; k < st.size(); ++k) {
        po.push_back(&so[k]);
        pi.push_back(&si[k]);
    }
    collapse(p.outer_lens, po);
    if (p.reduction) collapse(p.inner_lens, pi);
    for (std::size_t k = 0; k < st.size(); ++k) {
        access a;
        a.t = k < nin ? inputs[k].get_type() : output.get_type();
        a.outer = so[k];
        if (p.reduction) a.inner = si[k];
        (k < nin ? p.inputs.emplace_back() : p.output) = a;
    }
    for (auto a : axes) p.reduce_count *= domain[a];

    // Row classification and passes.
    for (std::size_t i = 0; i < p.nodes.size(); ++i) {
        auto& n = p.nodes[i];
        if (n.kind == node_kind::input) {
            n.row = p.inputs[n.input].row_level();
            continue;
        }
        if (n.kind == node_kind::constant) {
            n.row = true;
            continue;
        }
        std::size_t need = 0;
        for (auto a : n.args) need = std::max(need, p.nodes[a].pass);
        if (n.kind == node_kind::reduce) {
            n.pass = need + 1;
            n.row = true;
            p.passes = std::max(p.passes, n.pass);
            continue;
        }
        n.pass = need;
        const auto& lens = shapes[i - nin].lens();
        const std::size_t shift = domain.size() - lens.size();
        n.row = true;
        for (auto a : axes)
            if (a >= shift && lens[a - shift] != 1) n.row = false;
    }
    if (!p.reduction)
        for (auto& n : p.nodes) n.row = false;
    return p;
}

}  // namespace kiln::codegen
