// simplify_algebra: the driver, and the rules on constant arithmetic (reassociation,
// division by a constant, identities). The weight folds are in simplify_algebra_fold.cpp.
#include "passes/simplify_algebra.hpp"

#include "passes/rewrite_utils.hpp"
#include "passes/simplify_algebra_rules.hpp"

#include "ops/convert.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/tensor_views.hpp"

#include <kiln/context.hpp>
#include <kiln/errors.hpp>

#include <algorithm>
#include <cmath>

namespace kiln {

namespace algebra {

namespace {

using rewrite::constant_of;
using rewrite::is;

// For a commutative binary op, the (non-constant, constant) operands in either order;
// for others only (x, c) with the constant second.
struct operands {
    instruction_ref x;
    literal c;
};
std::optional<operands> split_constant(instruction_ref ins, bool commutative) {
    if (ins->inputs().size() != 2) return std::nullopt;
    for (std::size_t k = 0; k < (commutative ? 2u : 1u); ++k) {
        auto x = ins->inputs()[k];
        auto c = constant_of(ins->inputs()[1 - k]);
        if (c && !rewrite::is_constant(x)) return operands{x, *c};
    }
    return std::nullopt;
}

bool commutative(instruction_ref ins) { return ins->get_operator().traits().commutative; }

// The arithmetic ops the constant rules know.
enum class arith { none, add, sub, mul, div };
arith arith_of(instruction_ref ins) {
    if (is<op::add_op>(ins)) return arith::add;
    if (is<op::sub_op>(ins)) return arith::sub;
    if (is<op::mul_op>(ins)) return arith::mul;
    if (is<op::div_op>(ins)) return arith::div;
    return arith::none;
}
operation make_arith(arith a) {
    switch (a) {
        case arith::add: return op::add_op{};
        case arith::sub: return op::sub_op{};
        case arith::mul: return op::mul_op{};
        case arith::div: return op::div_op{};
        case arith::none: break;
    }
    throw_error(error_code::runtime, "simplify_algebra: no arithmetic op");
}

// op(a, b) on constants, with the op's reference compute (the same arithmetic the
// program would have done at run time).
literal compute_constant(arith a_op, const literal& a, const literal& b) {
    const operation op = make_arith(a_op);
    host_context ctx;
    auto s = op.compute_shape({a.get_shape(), b.get_shape()});
    return literal(op.compute(ctx, s, {a.get_argument(), b.get_argument()}));
}

bool power_of_two(double c) {
    int e = 0;
    return std::isfinite(c) && c != 0.0 && std::fabs(std::frexp(c, &e)) == 0.5;
}

// True when x*r rounds exactly like x/c: r = 1/c is a power of two representable in t
// (both are then the correctly rounded value of the same real number).
bool exact_reciprocal(double c, type t) {
    if (!power_of_two(c)) return false;
    const double r = 1.0 / c;
    return rewrite::values_of(rewrite::make_literal(shape(t, {1}), {r}))[0] == r;
}

}  // namespace

// (x op1 a) op2 b with constants a, b -> x op (a op' b), when (x op1 a) has no other
// user. The new constant is computed with the ops' own compute. For floats this rounds
// once where the original rounded twice: the result may differ in the last bit, as with
// any reassociation (the same folds ONNX Runtime and TensorRT make).
bool reassociate_constants(module& m, instruction_ref ins) {
    const arith outer = arith_of(ins);
    if (outer != arith::add && outer != arith::sub && outer != arith::mul) return false;
    auto o = split_constant(ins, commutative(ins));
    if (!o) return false;
    auto inner = o->x;
    const arith in_op = arith_of(inner);
    if (in_op != arith::add && in_op != arith::sub && in_op != arith::mul) return false;
    if (!rewrite::only_used_by(m, inner, ins)) return false;
    auto i = split_constant(inner, commutative(inner));
    if (!i) return false;
    const literal& a = i->c;
    const literal& b = o->c;
    arith new_op = arith::none;
    std::optional<literal> k;
    using enum arith;
    if (outer == mul && in_op == mul) {
        new_op = mul, k = compute_constant(mul, a, b);           // (x*a)*b = x*(a*b)
    } else if (outer == add && in_op == add) {
        new_op = add, k = compute_constant(add, a, b);           // (x+a)+b = x+(a+b)
    } else if (outer == add && in_op == sub) {
        new_op = add, k = compute_constant(sub, b, a);           // (x-a)+b = x+(b-a)
    } else if (outer == sub && in_op == add) {
        new_op = add, k = compute_constant(sub, a, b);           // (x+a)-b = x+(a-b)
    } else if (outer == sub && in_op == sub) {
        new_op = sub, k = compute_constant(add, a, b);           // (x-a)-b = x-(a+b)
    } else {
        return false;  // mixing + and * would distribute: not done here
    }
    // Broadcasting is associative, so the result keeps ins's shape; the new constant
    // must not be larger than the ones it replaces.
    if (k->get_shape().elements() > std::max(a.get_shape().elements(), b.get_shape().elements())) return false;
    const operation op = make_arith(new_op);
    auto s = op.compute_shape({i->x->get_shape(), k->get_shape()});
    if (s != ins->get_shape()) return false;
    m.replace_instruction(ins, op, {i->x, m.insert_literal(ins, *k)});
    return true;
}

// x / c -> x * (1/c) for a floating-point constant c. Exact (always done) when every
// 1/c is a representable power of two. Otherwise 1/c is rounded, and x*(1/c) can differ
// from x/c in the last ulp: done only under fast_math, and only for float32/float64
// (in float16/bfloat16 the rounded reciprocal would cost far more than an ulp).
bool divide_by_reciprocal(module& m, instruction_ref ins, bool fast_math) {
    if (!is<op::div_op>(ins)) return false;
    auto o = split_constant(ins, false);
    if (!o) return false;
    const type t = o->c.get_shape().get_type();
    if (!rewrite::is_float(t)) return false;  // integer division truncates
    auto cs = rewrite::values_of(o->c);
    std::vector<double> rs(cs.size());
    bool exact = true;
    for (std::size_t i = 0; i < cs.size(); ++i) {
        if (!std::isfinite(cs[i]) || cs[i] == 0.0) return false;
        rs[i] = 1.0 / cs[i];
        exact = exact && exact_reciprocal(cs[i], t);
    }
    if (!exact) {
        if (!fast_math || !rewrite::is_wide_float(t)) return false;
        auto rounded = rewrite::values_of(rewrite::make_literal(o->c.get_shape(), rs));
        for (auto r : rounded)
            if (!std::isnormal(r)) return false;  // 1/c overflows or underflows in t
    }
    auto r = m.insert_literal(ins, rewrite::make_literal(o->c.get_shape(), rs));
    m.replace_instruction(ins, op::mul_op{}, {o->x, r});
    return true;
}

// x*1, 1*x, x/1, x+0, 0+x, x-0 -> x, and single-input shape/type ops that return their
// input unchanged. Only when the result has exactly x's shape (lens and strides): a
// constant that broadcasts x to a larger shape is not an identity.
bool remove_identity(module& m, instruction_ref ins, bool fast_math) {
    const arith n = arith_of(ins);
    instruction_ref x = m.end();
    if (n != arith::none) {
        auto o = split_constant(ins, commutative(ins));
        if (!o) return false;
        const bool int_type = !rewrite::is_float(o->c.get_shape().get_type());
        bool identity = false;
        if (n == arith::mul || n == arith::div) {
            identity = rewrite::all_equal(o->c, 1.0);
        } else if (int_type) {
            identity = rewrite::all_equal(o->c, 0.0);
        } else {
            // x + (-0) and x - (+0) are exact for every x; x + (+0) and x - (-0) turn
            // -0 into +0, so they go only under fast_math.
            const bool exact_zero = rewrite::all_signed_zero(o->c, n == arith::sub ? false : true);
            identity = exact_zero || (fast_math && rewrite::all_equal(o->c, 0.0));
        }
        if (!identity) return false;
        x = o->x;
    } else if (ins->get_operator().traits().reshape_like ||
               rewrite::is_any<op::transpose, op::broadcast, op::convert_op>(ins)) {
        if (ins->inputs().size() != 1) return false;
        x = ins->inputs().front();
    } else {
        return false;
    }
    if (x->get_shape() != ins->get_shape()) return false;
    if (ins->outputs().empty()) return false;  // the implicit result of a module without @return
    m.replace_instruction(ins, x);
    return true;
}

// matmul(x*c, w) or matmul(w, x*c) with a scalar constant c -> matmul(x, w)*c. The product
// is linear in each operand, and a scale of the result is free (a post-op of the matmul
// kernel) where a scale of an operand is a pass over it: attention's q*(1/sqrt(d)).
// Exact when c is a power of two (barring overflow); otherwise the result may differ in
// the last bits, so only under fast_math.
bool scale_after_matmul(module& m, instruction_ref ins, bool fast_math) {
    if (!is<op::matmul>(ins) || ins->inputs().size() != 2 || !rewrite::is_float(ins->get_shape().get_type()))
        return false;
    for (std::size_t k = 0; k < 2; ++k) {
        auto scaled = ins->inputs()[k];
        if (!is<op::mul_op>(scaled) || !rewrite::only_used_by(m, scaled, ins)) continue;
        auto xc = split_constant(scaled, true);
        if (!xc || xc->c.get_shape().elements() != 1) continue;
        if (xc->x->get_shape().dynamic() || scaled->get_shape().dynamic()) continue;
        if (xc->x->get_shape().lens() != scaled->get_shape().lens()) continue;  // c would broadcast x
        const double c = rewrite::values_of(xc->c)[0];
        if (!power_of_two(c) && !fast_math) continue;
        const auto t = ins->get_shape().get_type();
        auto args = ins->inputs();
        args[k] = xc->x;
        auto product = m.insert_instruction(ins, ins->get_operator(), args);
        auto scale = m.insert_literal(ins, rewrite::make_literal(shape(t), {c}));
        m.replace_instruction(ins, op::mul_op{}, {product, scale});
        return true;
    }
    return false;
}

}  // namespace algebra

void simplify_algebra::apply(module& m) const {
    // Each sweep visits instructions in order, so a chain (conv -> mul -> add) folds in
    // one sweep; further sweeps catch what a rewrite exposed upstream. Rewritten
    // instructions keep their place; absorbed ones lose their users and are skipped.
    for (int sweep = 0; sweep < 16; ++sweep) {
        bool changed = false;
        for (auto ins = m.begin(); ins != m.end(); ++ins) {
            if (ins->is_param() || ins->is_literal() || ins->is_return()) continue;
            if (rewrite::unused(ins) && !rewrite::is_output(m, ins)) continue;
            const auto& s = ins->get_shape();
            if (!s.is_tensor()) continue;
            // gather_before_pointwise only rewires (the ops work their shapes out as they run),
            // and the Pad rules hold at any size (a zero Pad is the identity, a window's
            // padding its own), so they also run on dynamic shapes (a generic program:
            // DenseNet's zero Pads cost 8 of its 76 ms); the other rules need static ones.
            bool hit = algebra::gather_before_pointwise(m, ins) || algebra::remove_zero_pad(m, ins) ||
                       algebra::fold_pad_into_window(m, ins);
            if (!hit && !s.dynamic())
                hit = algebra::fold_batch_norm(m, ins) || algebra::fold_affine_into_weights(m, ins) ||
                      algebra::reassociate_constants(m, ins) || algebra::divide_by_reciprocal(m, ins, fast_math) ||
                      algebra::remove_identity(m, ins, fast_math) || algebra::scale_after_matmul(m, ins, fast_math) ||
                      algebra::channel_shuffle_to_gather(m, ins) || algebra::slice_of_gather(m, ins);
            changed = changed || hit;
        }
        if (!changed) return;
    }
}

}  // namespace kiln
