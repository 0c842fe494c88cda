#include "targets/cpu/fusion.hpp"

#include "targets/cpu/kernels/silu/silu.hpp"

#include "ops/normalization.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/reduce.hpp"
#include "passes/rewrite_utils.hpp"

#include <cmath>

namespace kiln::cpu {

namespace {

// The only user of `ins`, when it has exactly one and is not a program output.
std::optional<instruction_ref> single_user(instruction_ref ins) {
    if (ins->outputs().size() != 1) return std::nullopt;
    auto u = ins->outputs().front();
    if (u->is_return()) return std::nullopt;
    // Used twice by the same instruction (x * x) is not a chain.
    std::size_t uses = 0;
    for (auto in : u->inputs()) uses += in == ins ? 1 : 0;
    if (uses != 1) return std::nullopt;
    return u;
}

bool is_float32_tensor(instruction_ref ins) {
    const auto& s = ins->get_shape();
    return s.is_tensor() && !s.dynamic() && s.get_type() == type::float32;
}

bool near(std::optional<float> v, double want) {
    return v && std::fabs(static_cast<double>(*v) - want) <= 1e-5 * std::fabs(want);
}

// The other input of a binary instruction that has `x` as one input.
std::optional<instruction_ref> other_input(instruction_ref bin, instruction_ref x) {
    if (bin->inputs().size() != 2) return std::nullopt;
    if (bin->inputs()[0] == x && bin->inputs()[1] != x) return bin->inputs()[1];
    if (bin->inputs()[1] == x && bin->inputs()[0] != x) return bin->inputs()[0];
    return std::nullopt;
}

using rewrite::is;

// An `Op` (its struct, e.g. op::mul_op) with two inputs.
template <class Op>
bool is_binary(instruction_ref ins) {
    return is<Op>(ins) && ins->inputs().size() == 2;
}

// The binary ops a chain after an anchor takes as post-ops, and their oneDNN algorithms.
enum class chain_binary { add, sub, mul, div, max, min };

std::optional<chain_binary> chain_binary_of(instruction_ref ins) {
    if (is<op::add_op>(ins)) return chain_binary::add;
    if (is<op::sub_op>(ins)) return chain_binary::sub;
    if (is<op::mul_op>(ins)) return chain_binary::mul;
    if (is<op::div_op>(ins)) return chain_binary::div;
    if (is<op::max_op>(ins)) return chain_binary::max;
    if (is<op::min_op>(ins)) return chain_binary::min;
    return std::nullopt;
}

const char* dnnl_algorithm(chain_binary b) {
    static constexpr const char* algorithms[] = {"add", "sub", "mul", "div", "max", "min"};
    return algorithms[static_cast<int>(b)];
}

// x * sigmoid(x): returns the mul.
std::optional<instruction_ref> match_silu(instruction_ref x) {
    if (x->outputs().size() != 2) return std::nullopt;
    for (auto s : x->outputs()) {
        if (!is<op::sigmoid_op>(s) || s->inputs().size() != 1) continue;
        auto m = single_user(s);
        if (!m || !is_binary<op::mul_op>(*m)) continue;
        auto o = other_input(*m, s);
        if (!o || *o != x) continue;
        return m;
    }
    return std::nullopt;
}

// The erf GELU as exporters write it: x * (1 + erf(x / sqrt(2))) * 0.5, with the 0.5
// applied to the product or to x first, or not at all (the simplifier moves a 0.5 applied
// last past the matmul that reads the product: BERT's and ViT's MLPs). Returns the last
// mul and the instructions in between (in order), and whether the 0.5 is missing (the
// result is twice the GELU).
struct gelu_match {
    std::vector<instruction_ref> members;
    bool doubled = false;
};

std::optional<gelu_match> match_gelu(instruction_ref x) {
    if (x->outputs().size() != 2) return std::nullopt;
    for (auto d : x->outputs()) {
        auto c = other_input(d, x);
        if (!c) continue;
        const bool scaled =
            (is_binary<op::div_op>(d) && d->inputs()[0] == x && near(scalar_constant(*c), std::sqrt(2.0))) ||
            (is_binary<op::mul_op>(d) && near(scalar_constant(*c), std::sqrt(0.5)));
        if (!scaled) continue;
        auto e = single_user(d);
        if (!e || !is<op::erf_op>(*e)) continue;
        auto a = single_user(*e);
        if (!a || !is_binary<op::add_op>(*a)) continue;
        auto one = other_input(*a, *e);
        if (!one || !near(scalar_constant(*one), 1.0)) continue;
        auto m = single_user(*a);
        if (!m || !is_binary<op::mul_op>(*m)) continue;
        auto xm = other_input(*m, *a);
        if (!xm) continue;
        if (*xm == x) {
            // (x * (1 + erf)) * 0.5, or x * (1 + erf) alone
            auto h = single_user(*m);
            auto half = h && is_binary<op::mul_op>(*h) ? other_input(*h, *m) : std::nullopt;
            if (half && near(scalar_constant(*half), 0.5))
                return gelu_match{{d, *e, *a, *m, *h}, false};
            return gelu_match{{d, *e, *a, *m}, true};
        }
        // (x * 0.5) * (1 + erf)
        auto h = *xm;
        if (!is_binary<op::mul_op>(h) || single_user(h) != m) continue;
        auto half = other_input(h, x);
        if (!half || !near(scalar_constant(*half), 0.5)) continue;
        return gelu_match{{d, *e, *a, h, *m}, false};
    }
    return std::nullopt;
}

// A constant whose values run along `axis` of a result of lens `out` only (one per
// channel): a bias.
bool per_channel_constant(instruction_ref r, const std::vector<std::size_t>& out, std::size_t axis) {
    if (!r->is_literal() || !is_float32_tensor(r)) return false;
    const auto& l = r->get_shape().lens();
    if (l.size() > out.size() || r->get_shape().elements() != out[axis]) return false;
    const std::size_t shift = out.size() - l.size();
    for (std::size_t d = 0; d < l.size(); ++d)
        if (d + shift != axis && l[d] != 1) return false;
    return axis >= shift && l[axis - shift] == out[axis];
}

post_op binary_op(const std::string& alg, std::size_t extra_index) {
    post_op p;
    p.kind = "binary";
    p.algorithm = alg;
    p.input = static_cast<std::int64_t>(extra_index);
    return p;
}

post_op linear(float a, float b) {
    post_op p;
    p.algorithm = "linear";
    p.alpha = a;
    p.beta = b;
    return p;
}

}  // namespace

fused_chain find_post_ops(instruction_ref anchor, std::size_t channel_axis, bool can_take_bias,
                          const std::unordered_set<const instruction*>& claimed, bool own_silu) {
    fused_chain c;
    const auto& as = anchor->get_shape();
    // A generic program's anchor (cpu::dyn_matmul): every step keeps its dims, which must
    // be the anchor's in every run (each varying dim named), and its channels are fixed.
    const bool dynamic = as.is_tensor() && as.dynamic();
    if (dynamic) {
        if (as.get_type() != type::float32 || channel_axis >= as.ndim()) return c;
        for (const auto& d : as.dyn_dims())
            if (!d.is_fixed() && d.symbol.empty()) return c;
        if (!as.dyn_dims()[channel_axis].is_fixed()) return c;
    } else if (!is_float32_tensor(anchor)) {
        return c;
    }
    const auto out = dynamic ? as.min_lens() : as.lens();  // dynamic: only out[channel_axis] is read
    auto f32 = [&](instruction_ref x) {
        const auto& s = x->get_shape();
        return s.is_tensor() && s.get_type() == type::float32 && (dynamic || !s.dynamic());
    };
    auto same_dims = [&](instruction_ref x) {
        const auto& s = x->get_shape();
        if (!dynamic) return !s.dynamic() && s.lens() == out;
        return s.dynamic() && s.dyn_dims() == as.dyn_dims();
    };
    auto cur = anchor;
    auto free = [&](const std::vector<instruction_ref>& members) {
        for (auto m : members)
            if (claimed.count(&*m)) return false;
        return true;
    };
    auto step = [&](std::vector<instruction_ref> members) {
        c.members.insert(c.members.end(), members.begin(), members.end());
        c.steps.push_back({c.members.size(), c.post_ops.size(), c.extra.size(), c.bias.has_value()});
        cur = c.members.back();
    };
    while (true) {
        if (auto m = match_silu(cur); m && free({*m})) {
            if (own_silu && (dynamic || cur->get_shape().elements() >= silu_min_elements)) break;
            post_op p;
            p.algorithm = "swish";
            p.alpha = 1.0f;
            c.post_ops.push_back(p);
            step({(*m)->inputs()[0] == cur ? (*m)->inputs()[1] : (*m)->inputs()[0], *m});
            continue;
        }
        if (auto g = match_gelu(cur); g && free(g->members)) {
            post_op p;
            p.algorithm = "gelu_erf";
            c.post_ops.push_back(p);
            if (g->doubled) c.post_ops.push_back(linear(2.0f, 0.0f));
            step(g->members);
            continue;
        }
        auto u = single_user(cur);
        if (!u || !free({*u}) || !f32(*u) || !same_dims(*u)) break;
        if (auto e = eltwise_post_ops(*u, dynamic); e && (*u)->inputs()[0] == cur) {
            c.post_ops.insert(c.post_ops.end(), e->begin(), e->end());
            step({*u});
            continue;
        }
        const auto n = chain_binary_of(*u);
        auto r = other_input(*u, cur);
        if (!r || !n) break;
        using b = chain_binary;
        const bool cur_first = (*u)->inputs()[0] == cur;
        if (!cur_first && (n == b::sub || n == b::div)) break;  // r - x, r / x: not a post-op of x
        if (auto k = scalar_constant(*r)) {
            if (n == b::add) c.post_ops.push_back(linear(1.0f, *k));
            else if (n == b::sub) c.post_ops.push_back(linear(1.0f, -*k));
            else if (n == b::mul) c.post_ops.push_back(linear(*k, 0.0f));
            else if (n == b::div && *k != 0.0f) c.post_ops.push_back(linear(1.0f / *k, 0.0f));
            else break;
            step({*u});
            continue;
        }
        if (!f32(*r)) break;
        if (n == b::add && c.members.empty() && can_take_bias && per_channel_constant(*r, out, channel_axis)) {
            c.bias = *r;
            step({*u});
            continue;
        }
        // Dynamic: an operand of the result's own dims, or one value per channel.
        if (dynamic && !same_dims(*r) && !per_channel_constant(*r, out, channel_axis)) break;
        c.post_ops.push_back(binary_op(dnnl_algorithm(*n), c.extra.size()));
        c.extra.push_back(*r);
        step({*u});
    }
    return c;
}

fused_chain truncate(const fused_chain& c, std::size_t prefix) {
    fused_chain t;
    if (prefix == 0) return t;
    const auto& m = c.steps.at(prefix - 1);
    t.members.assign(c.members.begin(), c.members.begin() + static_cast<std::ptrdiff_t>(m.members));
    t.post_ops.assign(c.post_ops.begin(), c.post_ops.begin() + static_cast<std::ptrdiff_t>(m.post_ops));
    t.extra.assign(c.extra.begin(), c.extra.begin() + static_cast<std::ptrdiff_t>(m.extra));
    if (m.bias) t.bias = c.bias;
    t.steps.assign(c.steps.begin(), c.steps.begin() + static_cast<std::ptrdiff_t>(prefix));
    return t;
}

namespace {

// reduce_mean over exactly the last axis, keeping it.
bool mean_over_last(instruction_ref r, instruction_ref x) {
    if (!is<op::reduce_mean>(r) || r->inputs().size() != 1 || r->inputs()[0] != x) return false;
    const auto v = r->get_operator().to_value();
    const auto& axes = v.at("axes").get_array();
    const auto rank = static_cast<std::int64_t>(x->get_shape().ndim());
    return v.at("keepdims").get_bool() && axes.size() == 1 && (axes[0].get_int64() == rank - 1);
}

// A constant of one value per element of the last axis (len c).
bool row_constant(instruction_ref r, std::size_t c) {
    if (!r->is_literal() || !is_float32_tensor(r) || r->get_shape().elements() != c) return false;
    const auto& l = r->get_shape().lens();
    return !l.empty() && l.back() == c;
}

// The size of x's last axis when it is one (static, or a dynamic shape's fixed last dim):
// a generic program's layer norm over a range of rows folds like a static one.
std::optional<std::size_t> fixed_last_dim(instruction_ref x) {
    const auto& s = x->get_shape();
    if (!s.is_tensor() || s.get_type() != type::float32 || s.ndim() < 1) return std::nullopt;
    if (!s.dynamic()) return s.lens().back();
    const auto& d = s.dyn_dims().back();
    return d.is_fixed() ? std::optional<std::size_t>(d.min) : std::nullopt;
}

bool same_dims(const shape& a, const shape& b) {
    if (a.dynamic() != b.dynamic()) return false;
    return a.dynamic() ? a.dyn_dims() == b.dyn_dims() : a.lens() == b.lens();
}

}  // namespace

std::size_t fold_layer_norm_patterns(module& m) {
    std::size_t folded = 0;
    for (auto x = m.begin(); x != m.end(); ++x) {
        const auto last_dim = fixed_last_dim(x);
        if (!last_dim) continue;
        const std::size_t c = *last_dim;
        for (auto mean : std::vector<instruction_ref>(x->outputs())) {
            if (!mean_over_last(mean, x)) continue;
            auto d = single_user(mean);
            if (!d || !is_binary<op::sub_op>(*d) || (*d)->inputs()[0] != x || (*d)->outputs().size() != 2) continue;
            instruction_ref p = (*d)->outputs()[0], n = (*d)->outputs()[1];
            if (!is<op::pow_op>(p)) std::swap(p, n);
            if (!is<op::pow_op>(p) || p->inputs().size() != 2 || p->inputs()[0] != *d ||
                !near(scalar_constant(p->inputs()[1]), 2.0))
                continue;
            auto var = single_user(p);
            if (!var || !mean_over_last(*var, p)) continue;
            auto a = single_user(*var);
            if (!a || !is_binary<op::add_op>(*a)) continue;
            auto eps_in = other_input(*a, *var);
            auto eps = eps_in ? scalar_constant(*eps_in) : std::nullopt;
            if (!eps || *eps < 0) continue;
            auto sq = single_user(*a);
            if (!sq || !is<op::sqrt_op>(*sq)) continue;
            auto dv = single_user(*sq);
            if (!dv || *dv != n || !is_binary<op::div_op>(n) || n->inputs()[0] != *d || n->inputs()[1] != *sq) continue;
            // Optional scale and bias, one value per element of the last axis.
            instruction_ref last = n;
            std::vector<instruction_ref> chain{mean, *d, p, *var, *a, *sq, n};
            std::optional<instruction_ref> scale, bias;
            if (auto mu = single_user(n); mu && is_binary<op::mul_op>(*mu)) {
                auto g = other_input(*mu, n);
                if (g && row_constant(*g, c)) {
                    scale = *g;
                    last = *mu;
                    chain.push_back(*mu);
                    if (auto ad = single_user(*mu); ad && is_binary<op::add_op>(*ad)) {
                        auto bb = other_input(*ad, *mu);
                        if (bb && row_constant(*bb, c)) {
                            bias = *bb;
                            last = *ad;
                            chain.push_back(*ad);
                        }
                    }
                }
            }
            if (!same_dims(last->get_shape(), x->get_shape())) continue;
            if (!scale)
                scale = m.insert_literal(last, literal(shape(type::float32, {c}), std::vector<float>(c, 1.0f)));
            std::vector<instruction_ref> args{x, *scale};
            if (bias) args.push_back(*bias);
            const auto rank = static_cast<std::int64_t>(x->get_shape().ndim());
            m.replace_instruction(last, op::layer_norm{rank - 1, *eps}, args);
            for (auto it = chain.rbegin(); it != chain.rend(); ++it)
                if (*it != last && (*it)->outputs().empty()) m.remove_instruction(*it);
            ++folded;
            break;  // x's users changed
        }
    }
    return folded;
}

}  // namespace kiln::cpu
