// post_op_chains: what cpu::lowering will fuse into oneDNN primitives, so that the fusion
// pass leaves it there. It follows the same walk as cpu::find_post_ops: from a float32
// convolution / deconvolution / matmul / gemm, while the current result has one user
// (not a program output) with the anchor's lens, take SiLU and erf-GELU patterns,
// unary activations with a oneDNN eltwise form, and add/sub/mul/div/max/min with another
// float32 operand (the current value first for sub and div).
#include "targets/cpu/codegen/lowering.hpp"

#include <cmath>
#include <optional>
#include <set>
#include <vector>

namespace kiln::cpu::codegen {

namespace {

bool is_f32(instruction_ref ins) {
    const auto& s = ins->get_shape();
    return s.is_tensor() && !s.dynamic() && s.get_type() == type::float32;
}

std::optional<instruction_ref> single_user(instruction_ref ins) {
    if (ins->outputs().size() != 1) return std::nullopt;
    auto u = ins->outputs().front();
    if (u->is_return()) return std::nullopt;
    std::size_t uses = 0;
    for (auto in : u->inputs()) uses += in == ins ? 1 : 0;
    if (uses != 1) return std::nullopt;
    return u;
}

std::optional<double> scalar_constant(instruction_ref ins) {
    if (!ins->is_literal() || ins->get_shape().elements() != 1) return std::nullopt;
    const type t = ins->get_shape().get_type();
    if (t != type::float32 && t != type::float64 && t != type::float16 && t != type::bfloat16) return std::nullopt;
    return ins->get_literal().get_argument().get_double(0);
}

bool near(std::optional<double> v, double want) { return v && std::fabs(*v - want) <= 1e-5 * std::fabs(want); }

std::optional<instruction_ref> other_input(instruction_ref bin, instruction_ref x) {
    if (bin->inputs().size() != 2) return std::nullopt;
    if (bin->inputs()[0] == x && bin->inputs()[1] != x) return bin->inputs()[1];
    if (bin->inputs()[1] == x && bin->inputs()[0] != x) return bin->inputs()[0];
    return std::nullopt;
}

bool is_binary(instruction_ref ins, const char* name) { return ins->name() == name && ins->inputs().size() == 2; }

std::optional<std::vector<instruction_ref>> match_silu(instruction_ref x) {
    if (x->outputs().size() != 2) return std::nullopt;
    for (auto s : x->outputs()) {
        if (s->name() != "sigmoid" || s->inputs().size() != 1) continue;
        auto m = single_user(s);
        if (!m || !is_binary(*m, "mul")) continue;
        auto o = other_input(*m, s);
        if (o && *o == x) return std::vector<instruction_ref>{s, *m};
    }
    return std::nullopt;
}

std::optional<std::vector<instruction_ref>> match_gelu(instruction_ref x) {
    if (x->outputs().size() != 2) return std::nullopt;
    for (auto d : x->outputs()) {
        auto c = other_input(d, x);
        if (!c) continue;
        const bool scaled = (is_binary(d, "div") && d->inputs()[0] == x && near(scalar_constant(*c), std::sqrt(2.0))) ||
                            (is_binary(d, "mul") && near(scalar_constant(*c), std::sqrt(0.5)));
        if (!scaled) continue;
        auto e = single_user(d);
        if (!e || (*e)->name() != "erf") continue;
        auto a = single_user(*e);
        if (!a || !is_binary(*a, "add")) continue;
        auto one = other_input(*a, *e);
        if (!one || !near(scalar_constant(*one), 1.0)) continue;
        auto m = single_user(*a);
        if (!m || !is_binary(*m, "mul")) continue;
        auto xm = other_input(*m, *a);
        if (!xm) continue;
        if (*xm == x) {
            auto h = single_user(*m);
            if (!h || !is_binary(*h, "mul")) continue;
            auto half = other_input(*h, *m);
            if (!half || !near(scalar_constant(*half), 0.5)) continue;
            return std::vector<instruction_ref>{d, *e, *a, *m, *h};
        }
        auto h = *xm;
        if (!is_binary(h, "mul") || single_user(h) != m) continue;
        auto half = other_input(h, x);
        if (!half || !near(scalar_constant(*half), 0.5)) continue;
        return std::vector<instruction_ref>{d, *e, *a, h, *m};
    }
    return std::nullopt;
}

// A unary activation with a oneDNN eltwise form (as cpu::eltwise_post_ops sees it).
bool eltwise_form(instruction_ref u) {
    static const std::set<std::string> unary = {"relu", "leaky_relu", "elu",   "selu", "sigmoid", "tanh",
                                                "gelu", "swish",      "hard_swish", "hard_sigmoid", "exp", "log",
                                                "sqrt", "abs",        "neg",   "softplus", "mish"};
    const auto n = u->name();
    if (n == "clip")
        return u->inputs().size() == 3 && scalar_constant(u->inputs()[1]) && scalar_constant(u->inputs()[2]);
    if (n == "pow") {
        auto k = u->inputs().size() == 2 ? scalar_constant(u->inputs()[1]) : std::nullopt;
        return k && (*k == 2.0 || *k == 0.5 || *k == 1.0);
    }
    return u->inputs().size() == 1 && unary.count(n) > 0;
}

void walk(instruction_ref anchor, std::unordered_set<const instruction*>& out) {
    const auto lens = anchor->get_shape().lens();
    auto cur = anchor;
    auto take = [&](const std::vector<instruction_ref>& members) {
        for (auto m : members) {
            if (out.count(&*m)) return false;
        }
        for (auto m : members) out.insert(&*m);
        cur = members.back();
        return true;
    };
    while (true) {
        if (auto s = match_silu(cur); s && take(*s)) continue;
        if (auto g = match_gelu(cur); g && take(*g)) continue;
        auto u = single_user(cur);
        if (!u || !is_f32(*u) || (*u)->get_shape().lens() != lens) return;
        if (eltwise_form(*u) && (*u)->inputs()[0] == cur) {
            if (!take({*u})) return;
            continue;
        }
        const auto n = (*u)->name();
        auto r = other_input(*u, cur);
        if (!r || (n != "add" && n != "sub" && n != "mul" && n != "div" && n != "max" && n != "min")) return;
        if ((*u)->inputs()[0] != cur && (n == "sub" || n == "div")) return;
        if (!scalar_constant(*r) && !is_f32(*r)) return;
        if (!take({*u})) return;
    }
}

}  // namespace

std::unordered_set<const instruction*> post_op_chains(module& m) {
    std::unordered_set<const instruction*> out;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        const auto n = ins->name();
        if ((n == "convolution" || n == "deconvolution" || n == "matmul" || n == "gemm") && is_f32(ins)) walk(ins, out);
    }
    return out;
}

}  // namespace kiln::cpu::codegen
