// Helpers shared by the rewriting passes (simplify_algebra, simplify_reshapes): the
// checks ONNX Runtime's graph transformers make before fusing (a value has a single
// consumer, it is not a graph output, an operand is a constant) and reading and
// writing constants as doubles; and the typed matchers every pass uses instead of
// comparing op names.
#pragma once
#include <kiln/literal.hpp>
#include <kiln/module.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kiln::rewrite {

// True when `ins` is one of the module's results (used by @return, or the last
// instruction of a module without one).
bool is_output(module& m, instruction_ref ins);
// True when `user` is the only instruction reading `ins` and `ins` is not a result:
// a rewrite may then fold `ins` into `user` without computing it twice.
bool only_used_by(module& m, instruction_ref ins, instruction_ref user);
// True when nothing reads `ins` (a dead instruction that DCE will remove).
bool unused(instruction_ref ins);

// The value of a constant operand: a literal (views and copies of literals are folded
// by propagate_constants before the rewriting passes run).
std::optional<literal> constant_of(instruction_ref ins);
bool is_constant(instruction_ref ins);
// The 1-D constant int32/int64 indices `idx` into an axis of `extent` (a Gather's), negative
// ones counted from the end; nullopt when they are not such a constant or one is out of range.
std::optional<std::vector<std::int64_t>> constant_indices(instruction_ref idx, std::size_t extent);

bool is_float(type t);
// float32 and float64: types whose arithmetic the passes may redo in double and round
// once without losing accuracy compared to the op's own compute.
bool is_wide_float(type t);

// Elements of a constant in row-major order.
std::vector<double> values_of(const literal& l);
// A standard-layout literal of shape `s` (s's element type) from doubles.
literal make_literal(const shape& s, const std::vector<double>& values);

// True when every element equals v (NaN never does).
bool all_equal(const literal& l, double v);
// True when every element is +0 (sign_bit == false) or -0 (sign_bit == true).
bool all_signed_zero(const literal& l, bool sign_bit);

// When constant `c` broadcast (NumPy rules) to `out` varies at most along `axis`, its
// values along that axis (out[axis] of them); nullopt when it varies elsewhere or
// when broadcasting would grow `out`.
std::optional<std::vector<double>> values_along_axis(const literal& c, const std::vector<std::size_t>& out,
                                                     std::size_t axis);
// The elements of constant `c` broadcast (NumPy rules) to `out`, row-major; `c` must
// broadcast to `out` without growing it.
std::vector<double> broadcast_values(const literal& c, const std::vector<std::size_t>& out);
// The lens of broadcasting a and b (NumPy rules); nullopt when they do not broadcast.
std::optional<std::vector<std::size_t>> broadcast_lens(const std::vector<std::size_t>& a,
                                                       const std::vector<std::size_t>& b);

// Typed matchers: true when the op of `ins` is an `Op` (its struct, e.g. op::mul_op or
// builtin::allocate), asked of the type and not of the name.
template <class Op>
bool is(const instruction& ins) {
    return ins.get_operator().any_cast<Op>() != nullptr;
}
template <class Op>
bool is(instruction_ref ins) {
    return is<Op>(*ins);
}
template <class... Ops>
bool is_any(instruction_ref ins) {
    return (is<Ops>(*ins) || ...);
}

}  // namespace kiln::rewrite
