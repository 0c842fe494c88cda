// ONNX elementwise operators -> pointwise IR ops (src/ops/pointwise_*.hpp).
//
// One IR op per ONNX op, except the variadic ones: Sum, Max and Min become a left fold of
// add/max/min, and Mean a fold of add followed by a div by the input count, which is the
// order the ONNX reference evaluates them in (and leaves only binary pointwise ops for
// fusion to match).
#include "onnx/onnx_node.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"

#include <limits>

namespace kiln::onnx_frontend {

namespace {

template <class Op>
std::vector<instruction_ref> unary(onnx_node& node) {
    return {node.add(Op{}, {node.input(0)})};
}

// Input i with `extra` trailing dimensions of length 1, for the pre-opset-7 broadcasting
// rules NumPy broadcasting cannot express. A constant becomes a literal of the new shape;
// otherwise the tensor family's `unsqueeze` view is used when it is registered.
instruction_ref with_trailing_ones(onnx_node& node, std::size_t i, std::size_t extra) {
    auto in = node.input(i);
    const auto& s = in->get_shape();
    auto lens = s.lens();
    lens.resize(lens.size() + extra, 1);
    if (auto c = node.constant_input(i); c && s.get_type() != type::string) {
        argument a = c->contiguous();
        return node.add_literal(literal(shape(s.get_type(), lens), a.data()));
    }
    if (!has_op("unsqueeze"))
        node.fail(error_code::unsupported, "aligning input " + std::to_string(i) + " " + s.to_string() +
                                               " by the pre-opset-7 broadcast rule needs the unsqueeze op");
    value axes = value::make_array();
    for (std::size_t k = 0; k < extra; ++k) axes.push_back(value(static_cast<std::int64_t>(s.ndim() + k)));
    value attrs = value::make_object();
    attrs["axes"] = axes;
    return node.add(make_op("unsqueeze", attrs), {in});
}

// Before opset 7, binary ops broadcast B to A only with broadcast=1, and `axis` says
// where B's dims start in A's. When B's dims end where A's end, that is NumPy
// broadcasting; otherwise B gets trailing 1s.
instruction_ref legacy_second_input(onnx_node& node) {
    auto b = node.input(1);
    if (node.opset() >= 7 || node.attr_int("broadcast", 0) == 0 || !node.has_attr("axis")) return b;
    const auto& sa = node.input(0)->get_shape();
    const auto& sb = b->get_shape();
    if (sa.dynamic() || sb.dynamic()) return b;
    const auto ra = static_cast<std::int64_t>(sa.ndim()), rb = static_cast<std::int64_t>(sb.ndim());
    auto axis = node.attr_int("axis");
    if (axis < 0) axis += ra;
    if (axis < 0 || axis + rb > ra)
        node.fail(error_code::shape, "axis " + std::to_string(node.attr_int("axis")) + " does not fit B " +
                                         sb.to_string() + " into A " + sa.to_string());
    if (axis + rb == ra) return b;
    return with_trailing_ones(node, 1, static_cast<std::size_t>(ra - axis - rb));
}

template <class Op>
std::vector<instruction_ref> binary(onnx_node& node) {
    return {node.add(Op{}, {node.input(0), legacy_second_input(node)})};
}

// Sum/Max/Min/Mean: a left fold, as the ONNX reference computes them.
template <class Op>
instruction_ref fold(onnx_node& node) {
    auto ins = node.present_inputs();
    if (ins.empty()) node.fail(error_code::parse, "needs at least one input");
    auto acc = ins[0];
    for (std::size_t i = 1; i < ins.size(); ++i) acc = node.add(Op{}, {acc, ins[i]});
    return acc;
}
template <class Op>
std::vector<instruction_ref> variadic(onnx_node& node) {
    return {fold<Op>(node)};
}

std::vector<instruction_ref> parse_mean(onnx_node& node) {
    auto sum = fold<op::add_op>(node);
    const auto n = node.present_inputs().size();
    if (n == 1) return {sum};
    auto count = node.add_literal(literal(shape(sum->get_shape().get_type()), std::vector<double>{double(n)}));
    return {node.add(op::div_op{}, {sum, count})};
}

// A float attribute into the functor field of the same name.
template <class Op>
std::vector<instruction_ref> with_alpha(onnx_node& node, float fallback) {
    Op op;
    op.alpha = node.attr_float("alpha", fallback);
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_selu(onnx_node& node) {
    op::selu_op op;
    op.alpha = node.attr_float("alpha", op.alpha);
    op.gamma = node.attr_float("gamma", op.gamma);
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_hard_sigmoid(onnx_node& node) {
    op::hard_sigmoid_op op;
    op.alpha = node.attr_float("alpha", 0.2f);
    op.beta = node.attr_float("beta", 0.5f);
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_gelu(onnx_node& node) {
    op::gelu_op op;
    op.approximate = node.attr_string("approximate", "none");
    if (op.approximate != "none" && op.approximate != "tanh")
        node.fail(error_code::parse, "approximate must be \"none\" or \"tanh\", got \"" + op.approximate + "\"");
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_isinf(onnx_node& node) {
    op::isinf_op op;
    op.detect_negative = node.attr_int("detect_negative", 1) != 0;
    op.detect_positive = node.attr_int("detect_positive", 1) != 0;
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_shrink(onnx_node& node) {
    op::shrink_op op;
    op.bias = node.attr_float("bias", 0.0f);
    op.lambd = node.attr_float("lambd", 0.5f);
    return {node.add(op, {node.input(0)})};
}

std::vector<instruction_ref> parse_mod(onnx_node& node) {
    op::mod_op op;
    op.fmod = node.attr_int("fmod", 0) != 0;
    return {node.add(op, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_bit_shift(onnx_node& node) {
    op::bit_shift_op op;
    auto d = node.attr_string("direction");
    if (d == "LEFT") op.direction = "left";
    else if (d == "RIGHT") op.direction = "right";
    else node.fail(error_code::parse, "direction must be \"LEFT\" or \"RIGHT\", got \"" + d + "\"");
    return {node.add(op, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_swiglu(onnx_node& node) {
    op::swiglu_op op;
    op.alpha = node.attr_float("alpha", 1.0f);
    return {node.add(op, {node.input(0), node.input(1)})};
}

// Before opset 7 a 1-D slope of size C applies along axis 1 (channels), also where x's
// channel dim is only known at run time (PyTorch's PReLU exported with every dim dynamic).
std::vector<instruction_ref> parse_prelu(onnx_node& node) {
    auto x = node.input(0);
    auto slope = node.input(1);
    const auto& sx = x->get_shape();
    const auto& ss = slope->get_shape();
    const auto channels_fit = [&] {
        if (!sx.dynamic()) return ss.lens()[0] == sx.lens()[1];
        const auto& c = sx.dyn_dims()[1];
        return c.min <= ss.lens()[0] && ss.lens()[0] <= c.max;
    };
    if (node.opset() < 7 && sx.is_tensor() && !ss.dynamic() && ss.ndim() == 1 && sx.ndim() > 2 &&
        ss.lens()[0] != 1 && channels_fit())
        slope = with_trailing_ones(node, 1, sx.ndim() - 2);
    return {node.add(op::prelu_op{}, {x, slope})};
}

// A scalar literal of type t holding its lowest (or highest) value: -inf/+inf for floats.
instruction_ref bound_literal(onnx_node& node, type t, bool highest) {
    argument a{shape(t)};
    bool ok = visit_list(op::numeric_types{}, t, [&](auto tag) {
        using T = typename decltype(tag)::type;
        using L = compute_t<T>;
        L v;
        if constexpr (std::numeric_limits<L>::has_infinity)
            v = highest ? std::numeric_limits<L>::infinity() : -std::numeric_limits<L>::infinity();
        else
            v = highest ? std::numeric_limits<L>::max() : std::numeric_limits<L>::lowest();
        *a.data_as<T>() = convert<T>(v);
    });
    if (!ok) node.fail(error_code::type, "clip does not support element type " + std::string(type_name(t)));
    return node.add_literal(literal(a));
}

std::vector<instruction_ref> parse_clip(onnx_node& node) {
    auto x = node.input(0);
    const type t = x->get_shape().get_type();
    instruction_ref lo, hi;
    if (node.opset() < 11) {
        auto attr_bound = [&](const char* n, bool highest) {
            if (!node.has_attr(n)) return bound_literal(node, t, highest);
            return node.add_literal(literal(shape(t), std::vector<float>{node.attr_float(n)}));
        };
        lo = attr_bound("min", false);
        hi = attr_bound("max", true);
    } else {
        lo = node.has_input(1) ? node.input(1) : bound_literal(node, t, false);
        hi = node.has_input(2) ? node.input(2) : bound_literal(node, t, true);
    }
    return {node.add(op::clip_op{}, {x, lo, hi})};
}

std::vector<instruction_ref> parse_where(onnx_node& node) {
    return {node.add(op::where_op{}, {node.input(0), node.input(1), node.input(2)})};
}

}  // namespace

KILN_ONNX_OP("Abs", unary<op::abs_op>)
KILN_ONNX_OP("Neg", unary<op::neg_op>)
KILN_ONNX_OP("Exp", unary<op::exp_op>)
KILN_ONNX_OP("Log", unary<op::log_op>)
KILN_ONNX_OP("Sqrt", unary<op::sqrt_op>)
KILN_ONNX_OP("Reciprocal", unary<op::reciprocal_op>)
KILN_ONNX_OP("Sin", unary<op::sin_op>)
KILN_ONNX_OP("Cos", unary<op::cos_op>)
KILN_ONNX_OP("Tan", unary<op::tan_op>)
KILN_ONNX_OP("Asin", unary<op::asin_op>)
KILN_ONNX_OP("Acos", unary<op::acos_op>)
KILN_ONNX_OP("Atan", unary<op::atan_op>)
KILN_ONNX_OP("Sinh", unary<op::sinh_op>)
KILN_ONNX_OP("Cosh", unary<op::cosh_op>)
KILN_ONNX_OP("Asinh", unary<op::asinh_op>)
KILN_ONNX_OP("Acosh", unary<op::acosh_op>)
KILN_ONNX_OP("Atanh", unary<op::atanh_op>)
KILN_ONNX_OP("Tanh", unary<op::tanh_op>)
KILN_ONNX_OP("Floor", unary<op::floor_op>)
KILN_ONNX_OP("Ceil", unary<op::ceil_op>)
KILN_ONNX_OP("Round", unary<op::round_op>)
KILN_ONNX_OP("Sigmoid", unary<op::sigmoid_op>)
KILN_ONNX_OP("Softplus", unary<op::softplus_op>)
KILN_ONNX_OP("Softsign", unary<op::softsign_op>)
KILN_ONNX_OP("HardSwish", unary<op::hard_swish_op>)
KILN_ONNX_OP("Mish", unary<op::mish_op>)
KILN_ONNX_OP("Erf", unary<op::erf_op>)
KILN_ONNX_OP("Sign", unary<op::sign_op>)
KILN_ONNX_OP("Relu", unary<op::relu_op>)
KILN_ONNX_OP("IsNaN", unary<op::isnan_op>)
KILN_ONNX_OP("Not", unary<op::logical_not_op>)
KILN_ONNX_OP("BitwiseNot", unary<op::bitwise_not_op>)
KILN_ONNX_OP("LeakyRelu", [](onnx_node& n) { return with_alpha<op::leaky_relu_op>(n, 0.01f); })
KILN_ONNX_OP("Elu", [](onnx_node& n) { return with_alpha<op::elu_op>(n, 1.0f); })
KILN_ONNX_OP("Celu", [](onnx_node& n) { return with_alpha<op::celu_op>(n, 1.0f); })
KILN_ONNX_OP("ThresholdedRelu", [](onnx_node& n) { return with_alpha<op::thresholded_relu_op>(n, 1.0f); })
KILN_ONNX_OP("Swish", [](onnx_node& n) { return with_alpha<op::swish_op>(n, 1.0f); })
KILN_ONNX_OP("Selu", parse_selu)
KILN_ONNX_OP("HardSigmoid", parse_hard_sigmoid)
KILN_ONNX_OP("Gelu", parse_gelu)
KILN_ONNX_OP("IsInf", parse_isinf)
KILN_ONNX_OP("Shrink", parse_shrink)

KILN_ONNX_OP("Add", binary<op::add_op>)
KILN_ONNX_OP("Sub", binary<op::sub_op>)
KILN_ONNX_OP("Mul", binary<op::mul_op>)
KILN_ONNX_OP("Div", binary<op::div_op>)
KILN_ONNX_OP("Pow", binary<op::pow_op>)
KILN_ONNX_OP("And", binary<op::logical_and_op>)
KILN_ONNX_OP("Or", binary<op::logical_or_op>)
KILN_ONNX_OP("Xor", binary<op::logical_xor_op>)
KILN_ONNX_OP("Equal", binary<op::equal_op>)
KILN_ONNX_OP("Less", binary<op::less_op>)
KILN_ONNX_OP("Greater", binary<op::greater_op>)
KILN_ONNX_OP("LessOrEqual", binary<op::less_or_equal_op>)
KILN_ONNX_OP("GreaterOrEqual", binary<op::greater_or_equal_op>)
KILN_ONNX_OP("BitwiseAnd", binary<op::bitwise_and_op>)
KILN_ONNX_OP("BitwiseOr", binary<op::bitwise_or_op>)
KILN_ONNX_OP("BitwiseXor", binary<op::bitwise_xor_op>)
KILN_ONNX_OP("Mod", parse_mod)
KILN_ONNX_OP("BitShift", parse_bit_shift)
KILN_ONNX_OP("PRelu", parse_prelu)
KILN_ONNX_OP("SwiGLU", parse_swiglu)
KILN_ONNX_OP("Where", parse_where)
KILN_ONNX_OP("Clip", parse_clip)
KILN_ONNX_OP("Sum", variadic<op::add_op>)
KILN_ONNX_OP("Max", variadic<op::max_op>)
KILN_ONNX_OP("Min", variadic<op::min_op>)
KILN_ONNX_OP("Mean", parse_mean)

}  // namespace kiln::onnx_frontend
