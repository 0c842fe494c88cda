#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/onednn/primitive_kernel.hpp"

#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <utility>

namespace kiln::cpu {

namespace {

const std::vector<std::pair<std::string, dnnl::algorithm>>& eltwise_table() {
    using a = dnnl::algorithm;
    static const std::vector<std::pair<std::string, dnnl::algorithm>> t{
        {"relu", a::eltwise_relu},         {"elu", a::eltwise_elu},           {"tanh", a::eltwise_tanh},
        {"logistic", a::eltwise_logistic}, {"gelu_erf", a::eltwise_gelu_erf}, {"gelu_tanh", a::eltwise_gelu_tanh},
        {"swish", a::eltwise_swish},       {"hardswish", a::eltwise_hardswish}, {"clip_v2", a::eltwise_clip_v2},
        {"linear", a::eltwise_linear},     {"exp", a::eltwise_exp},           {"log", a::eltwise_log},
        {"sqrt", a::eltwise_sqrt},         {"abs", a::eltwise_abs},           {"soft_relu", a::eltwise_soft_relu},
        {"mish", a::eltwise_mish},         {"square", a::eltwise_square},
    };
    return t;
}

const std::vector<std::pair<std::string, dnnl::algorithm>>& binary_table() {
    using a = dnnl::algorithm;
    static const std::vector<std::pair<std::string, dnnl::algorithm>> t{
        {"add", a::binary_add}, {"sub", a::binary_sub}, {"mul", a::binary_mul},
        {"div", a::binary_div}, {"max", a::binary_max}, {"min", a::binary_min},
    };
    return t;
}

dnnl::algorithm lookup(const std::vector<std::pair<std::string, dnnl::algorithm>>& table, const std::string& name,
                       const char* what) {
    for (auto& [n, alg] : table)
        if (n == name) return alg;
    throw_error(error_code::parse, std::string("cpu target: unknown ") + what + " algorithm '" + name + "'");
}

float attr_float(const value& v, const char* key, float fallback) {
    const auto* f = v.find(key);
    return f && f->is_number() ? static_cast<float>(f->get_double()) : fallback;
}

post_op eltwise(const std::string& alg, float alpha = 0.0f, float beta = 0.0f) {
    post_op p;
    p.algorithm = alg;
    p.alpha = alpha;
    p.beta = beta;
    return p;
}

}  // namespace

bool has_sum_post_op(const std::vector<post_op>& ops) {
    return std::any_of(ops.begin(), ops.end(), [](const post_op& p) { return p.kind == "sum"; });
}

dnnl::algorithm eltwise_algorithm(const std::string& name) { return lookup(eltwise_table(), name, "eltwise"); }
dnnl::algorithm binary_algorithm(const std::string& name) { return lookup(binary_table(), name, "binary"); }

int binary_post_op_arg(std::size_t index) {
    return DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(index)) | DNNL_ARG_SRC_1;
}

namespace {
dnnl::memory::desc src1_md(const std::vector<shape>& inputs, std::size_t i, std::size_t dst_rank,
                           const std::vector<md_record>& layouts) {
    if (i < layouts.size() && !layouts[i].empty()) return layouts[i].to_md();
    return md_with_rank(inputs.at(i), dst_rank);
}
}  // namespace

dnnl::post_ops make_post_ops(const std::vector<post_op>& ops, const std::vector<shape>& inputs, std::size_t dst_rank,
                             const std::vector<md_record>& layouts) {
    dnnl::post_ops po;
    for (const auto& p : ops) {
        if (p.kind == "eltwise") {
            po.append_eltwise(1.0f, eltwise_algorithm(p.algorithm), p.alpha, p.beta);
        } else if (p.kind == "sum") {
            po.append_sum(1.0f);  // the destination's own values (sum_post_op.hpp)
        } else if (p.kind == "binary") {
            if (p.input < 0 || static_cast<std::size_t>(p.input) >= inputs.size())
                throw_error(error_code::parse, "cpu target: binary post-op reads input " + std::to_string(p.input) +
                                                   " of an op with " + std::to_string(inputs.size()) + " inputs");
            po.append_binary(binary_algorithm(p.algorithm),
                             src1_md(inputs, static_cast<std::size_t>(p.input), dst_rank, layouts));
        } else {
            throw_error(error_code::parse, "cpu target: unknown post-op kind '" + p.kind + "'");
        }
    }
    return po;
}

void bind_post_op_inputs(primitive_kernel& k, const std::vector<post_op>& ops, const std::vector<shape>& operands,
                         std::size_t dst_rank, const std::vector<md_record>& layouts) {
    for (std::size_t i = 0; i < ops.size(); ++i)
        if (ops[i].kind == "binary") {
            const auto in = static_cast<std::size_t>(ops[i].input);
            k.bind(binary_post_op_arg(i), in, src1_md(operands, in, dst_rank, layouts));
        }
}

dnnl::primitive_attr make_attr(const std::vector<post_op>& ops, const std::vector<shape>& operands,
                               std::size_t dst_rank, const std::vector<md_record>& layouts) {
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    // Full fp32 arithmetic whatever ONEDNN_DEFAULT_FPMATH_MODE says: fast_math may
    // approximate transcendental functions, never the precision of matrix products.
    attr.set_fpmath_mode(dnnl::fpmath_mode::strict);
    if (!ops.empty()) attr.set_post_ops(make_post_ops(ops, operands, dst_rank, layouts));
    return attr;
}

std::optional<float> scalar_constant(instruction_ref ins) {
    if (!ins->is_literal()) return std::nullopt;
    const auto& s = ins->get_shape();
    if (!s.is_tensor() || s.dynamic() || s.elements() != 1) return std::nullopt;
    const type t = s.get_type();
    if (t != type::float32 && t != type::float64 && t != type::float16 && t != type::bfloat16) return std::nullopt;
    return static_cast<float>(ins->get_literal().get_argument().get_double(0));
}

std::optional<std::vector<post_op>> eltwise_post_ops(instruction_ref ins, bool dynamic_ok) {
    const auto& s = ins->get_shape();
    if (!s.is_tensor() || (s.dynamic() && !dynamic_ok) || s.get_type() != type::float32) return std::nullopt;
    using rewrite::is;
    const auto& inputs = ins->inputs();
    const value attrs = ins->get_operator().to_value();
    using v = std::vector<post_op>;
    if (is<op::clip_op>(ins)) {
        if (inputs.size() != 3) return std::nullopt;
        auto lo = scalar_constant(inputs[1]);
        auto hi = scalar_constant(inputs[2]);
        if (!lo || !hi) return std::nullopt;
        // clip(x, lo, hi) = min(max(x, lo), hi), also when lo > hi, as clip_v2 computes it.
        return v{eltwise("clip_v2", *lo, *hi)};
    }
    if (is<op::pow_op>(ins)) {
        // x ** k for the constants whose oneDNN forms are exact for every x (oneDNN's
        // pow may go through exp(log x), wrong for negative x).
        auto k = inputs.size() == 2 ? scalar_constant(inputs[1]) : std::nullopt;
        if (!k) return std::nullopt;
        if (*k == 2.0f) return v{eltwise("square")};
        if (*k == 0.5f) return v{eltwise("sqrt")};
        if (*k == 1.0f) return v{eltwise("linear", 1.0f, 0.0f)};
        return std::nullopt;
    }
    if (inputs.size() != 1) return std::nullopt;
    if (is<op::relu_op>(ins)) return v{eltwise("relu")};
    if (is<op::leaky_relu_op>(ins)) return v{eltwise("relu", attr_float(attrs, "alpha", 0.01f))};
    if (is<op::elu_op>(ins)) return v{eltwise("elu", attr_float(attrs, "alpha", 1.0f))};
    if (is<op::selu_op>(ins))
        return v{eltwise("elu", attr_float(attrs, "alpha", 1.67326319f)),
                 eltwise("linear", attr_float(attrs, "gamma", 1.05070102f), 0.0f)};
    if (is<op::sigmoid_op>(ins)) return v{eltwise("logistic")};
    if (is<op::tanh_op>(ins)) return v{eltwise("tanh")};
    if (is<op::gelu_op>(ins)) {
        const auto* a = attrs.find("approximate");
        std::string approx = a && a->is_string() ? a->get_string() : "none";
        if (approx == "none") return v{eltwise("gelu_erf")};
        if (approx == "tanh") return v{eltwise("gelu_tanh")};
        return std::nullopt;
    }
    if (is<op::swish_op>(ins)) return v{eltwise("swish", attr_float(attrs, "alpha", 1.0f))};
    if (is<op::hard_swish_op>(ins)) return v{eltwise("hardswish")};
    if (is<op::hard_sigmoid_op>(ins))
        return v{eltwise("linear", attr_float(attrs, "alpha", 0.2f), attr_float(attrs, "beta", 0.5f)),
                 eltwise("clip_v2", 0.0f, 1.0f)};
    if (is<op::exp_op>(ins)) return v{eltwise("exp")};
    // Not log: oneDNN's polynomial log is off by ulps near 1 (log(1) = -1.4e-6, not 0).
    if (is<op::sqrt_op>(ins)) return v{eltwise("sqrt")};
    if (is<op::abs_op>(ins)) return v{eltwise("abs")};
    if (is<op::neg_op>(ins)) return v{eltwise("linear", -1.0f, 0.0f)};
    // Not softplus: oneDNN's soft_relu loses ~1% relative precision for x << 0.
    if (is<op::mish_op>(ins)) return v{eltwise("mish")};
    return std::nullopt;
}

std::optional<fused_post_kind> fused_post_kind_of(const post_op& p, bool with_gelu, bool with_hardswish) {
    using k = fused_post_kind;
    if (p.kind == "eltwise") {
        if (with_gelu && p.algorithm == "gelu_erf") return k::gelu_erf;
        if (with_hardswish && p.algorithm == "hardswish") return k::hardswish;
        if (p.algorithm == "relu") return k::relu;
        if (p.algorithm == "linear") return k::linear;
        if (p.algorithm == "clip_v2") return k::clip;
        return std::nullopt;
    }
    if (p.kind != "binary") return std::nullopt;
    if (p.algorithm == "add") return k::add;
    if (p.algorithm == "sub") return k::sub;
    if (p.algorithm == "mul") return k::mul;
    if (p.algorithm == "max") return k::max;
    if (p.algorithm == "min") return k::min;
    return std::nullopt;
}

}  // namespace kiln::cpu
