// Node expressions: each mirrors the scalar apply function of its op (src/ops/pointwise_*.hpp,
// convert.hpp) in the same evaluation order, with the op's constants rounded to float as
// apply rounds them. tests/unit/cpu_codegen_test.cpp compares every op bit for bit
// with the reference kernels.
#include "codegen/expr.hpp"

#include <kiln/errors.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

namespace kiln::codegen {

namespace {

// A float constant as an exact C++ literal.
std::string flit(float v) {
    if (std::isnan(v)) return "__builtin_nanf(\"\")";
    if (std::isinf(v)) return v > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%af", static_cast<double>(v));
    return v < 0 || std::signbit(v) ? "(" + std::string(buf) + ")" : std::string(buf);
}

float attr(const value& attrs, const char* name, float fallback) {
    const auto* a = attrs.find(name);
    return a && a->is_number() ? static_cast<float>(a->get_double()) : fallback;
}

struct ctx {
    const plan& p;
    const node& n;
    std::vector<std::string> a;  // argument variables
    value attrs;
    bool fast;
    // The constant value of argument i, when it is a constant node.
    const double* constant(std::size_t i) const {
        const auto& an = p.nodes[n.args[i]];
        return an.kind == node_kind::constant ? &an.value : nullptr;
    }
    std::string exp(const std::string& x) const { return (fast ? "kiln_fexp(" : "__builtin_expf(") + x + ")"; }
    std::string sigmoid(const std::string& x) const { return (fast ? "kiln_fsigmoid(" : "kiln_sigmoid(") + x + ")"; }
    std::string tanh(const std::string& x) const { return (fast ? "kiln_ftanh(" : "__builtin_tanhf(") + x + ")"; }
    std::string erf(const std::string& x) const { return (fast ? "kiln_ferf(" : "__builtin_erff(") + x + ")"; }
    std::string f(const char* name, float fallback) const { return flit(attr(attrs, name, fallback)); }
};

using rule = std::function<std::string(const ctx&)>;

std::string call(const char* fn, const std::string& x) { return std::string(fn) + "(" + x + ")"; }

const std::map<std::string, rule>& rules() {
    static const std::map<std::string, rule> r = [] {
        std::map<std::string, rule> m;
        // <cmath> one-liners on float.
        for (const char* fn : {"log", "sqrt", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh",
                               "acosh", "atanh", "floor", "ceil"}) {
            const std::string b = std::string("__builtin_") + fn + "f";
            m[fn] = [b](const ctx& c) { return b + "(" + c.a[0] + ")"; };
        }
        m["round"] = [](const ctx& c) { return call("__builtin_nearbyintf", c.a[0]); };
        m["abs"] = [](const ctx& c) { return call("__builtin_fabsf", c.a[0]); };
        m["exp"] = [](const ctx& c) { return c.exp(c.a[0]); };
        m["tanh"] = [](const ctx& c) { return c.tanh(c.a[0]); };
        m["erf"] = [](const ctx& c) { return c.erf(c.a[0]); };
        m["sigmoid"] = [](const ctx& c) { return c.sigmoid(c.a[0]); };
        m["reciprocal"] = [](const ctx& c) { return "(1.0f / " + c.a[0] + ")"; };
        m["softplus"] = [](const ctx& c) { return call("kiln_softplus", c.a[0]); };
        m["softsign"] = [](const ctx& c) { return "(" + c.a[0] + " / (1.0f + __builtin_fabsf(" + c.a[0] + ")))"; };
        m["hard_swish"] = [](const ctx& c) {
            const auto& x = c.a[0];
            return "(" + x + " * kiln_max(0.0f, kiln_min(1.0f, " + x + " * " + flit(static_cast<float>(1.0 / 6.0)) +
                   " + 0.5f)))";
        };
        m["mish"] = [](const ctx& c) { return "(" + c.a[0] + " * " + c.tanh("kiln_softplus(" + c.a[0] + ")") + ")"; };
        m["neg"] = [](const ctx& c) { return "(0.0f - " + c.a[0] + ")"; };
        m["sign"] = [](const ctx& c) {
            const auto& x = c.a[0];
            return "(" + x + " > 0.0f ? 1.0f : (" + x + " < 0.0f ? -1.0f : " + x + "))";
        };
        m["relu"] = [](const ctx& c) { return "(" + c.a[0] + " < 0.0f ? 0.0f : " + c.a[0] + ")"; };
        m["leaky_relu"] = [](const ctx& c) {
            return "(" + c.a[0] + " < 0.0f ? " + c.a[0] + " * " + c.f("alpha", 0.01f) + " : " + c.a[0] + ")";
        };
        m["elu"] = [](const ctx& c) {
            const auto& x = c.a[0];
            return "(" + x + " > 0.0f ? " + x + " : " + c.f("alpha", 1.0f) + " * (__builtin_expf(" + x + ") - 1.0f))";
        };
        m["selu"] = [](const ctx& c) {
            const auto& x = c.a[0];
            const auto al = c.f("alpha", 1.67326319217681884765625f);
            return "((" + x + " > 0.0f ? " + x + " : __builtin_expf(" + x + ") * " + al + " - " + al + ") * " +
                   c.f("gamma", 1.05070102214813232421875f) + ")";
        };
        m["celu"] = [](const ctx& c) {
            const auto& x = c.a[0];
            const auto al = c.f("alpha", 1.0f);
            return "(kiln_max(0.0f, " + x + ") + kiln_min(0.0f, " + al + " * (__builtin_expf(" + x + " / " + al +
                   ") - 1.0f)))";
        };
        m["hard_sigmoid"] = [](const ctx& c) {
            return "kiln_max(0.0f, kiln_min(1.0f, " + c.a[0] + " * " + c.f("alpha", 0.2f) + " + " + c.f("beta", 0.5f) +
                   "))";
        };
        m["thresholded_relu"] = [](const ctx& c) {
            return "(" + c.a[0] + " > " + c.f("alpha", 1.0f) + " ? " + c.a[0] + " : 0.0f)";
        };
        m["gelu"] = [](const ctx& c) {
            const auto& x = c.a[0];
            const auto* ap = c.attrs.find("approximate");
            if (ap && ap->is_string() && ap->get_string() == "tanh") {
                const auto k = flit(static_cast<float>(0.79788456080286535588));
                const auto q = flit(static_cast<float>(0.044715));
                return "(0.5f * " + x + " * (1.0f + " + c.tanh(k + " * (" + x + " + " + q + " * " + x + " * " + x +
                                                              " * " + x + ")") +
                       "))";
            }
            return "(0.5f * " + x + " * (1.0f + " + c.erf(x + " * " + flit(static_cast<float>(0.70710678118654752440))) +
                   "))";
        };
        m["swish"] = [](const ctx& c) {
            return "(" + c.a[0] + " * " + c.sigmoid(c.f("alpha", 1.0f) + " * " + c.a[0]) + ")";
        };
        m["shrink"] = [](const ctx& c) {
            const auto& x = c.a[0];
            const auto l = attr(c.attrs, "lambd", 0.5f);
            const auto b = c.f("bias", 0.0f);
            return "(" + x + " < " + flit(-l) + " ? " + x + " + " + b + " : (" + x + " > " + flit(l) + " ? " + x +
                   " - " + b + " : 0.0f))";
        };
        m["isnan"] = [](const ctx& c) { return "(" + c.a[0] + " != " + c.a[0] + ")"; };
        m["isinf"] = [](const ctx& c) {
            const auto* dn = c.attrs.find("detect_negative");
            const auto* dp = c.attrs.find("detect_positive");
            const bool neg = !dn || !dn->is_bool() || dn->get_bool();
            const bool pos = !dp || !dp->is_bool() || dp->get_bool();
            return "(__builtin_isinf(" + c.a[0] + ") && (" + c.a[0] + " > 0.0f ? " + (pos ? "true" : "false") + " : " +
                   (neg ? "true" : "false") + "))";
        };
        m["logical_not"] = [](const ctx& c) { return "(!" + c.a[0] + ")"; };
        // Binary.
        for (auto [name, opr] : {std::pair{"add", "+"}, {"sub", "-"}, {"mul", "*"}, {"equal", "=="}, {"less", "<"},
                                 {"greater", ">"}, {"less_or_equal", "<="}, {"greater_or_equal", ">="},
                                 {"logical_and", "&&"}, {"logical_or", "||"}, {"logical_xor", "!="}}) {
            const std::string o = opr;
            m[name] = [o](const ctx& c) { return "(" + c.a[0] + " " + o + " " + c.a[1] + ")"; };
        }
        m["div"] = [](const ctx& c) {
            const double* k = c.constant(1);
            if (c.fast && k && std::isfinite(static_cast<float>(*k)) && static_cast<float>(*k) != 0.0f)
                return "(" + c.a[0] + " * " + flit(1.0f / static_cast<float>(*k)) + ")";
            return "(" + c.a[0] + " / " + c.a[1] + ")";
        };
        m["pow"] = [](const ctx& c) {
            const auto& x = c.a[0];
            if (const double* k = c.constant(1)) {
                // Exact: pow(double(x), 2) is x*x exactly, rounded once to float.
                if (*k == 1.0) return "(" + x + ")";
                if (*k == 2.0) return "(" + x + " * " + x + ")";
                if (c.fast && *k == 3.0) return "(" + x + " * " + x + " * " + x + ")";
                if (c.fast && *k == -1.0) return "(1.0f / " + x + ")";
            }
            return "((float)__builtin_pow((double)" + x + ", (double)" + c.a[1] + "))";
        };
        m["mod"] = [](const ctx& c) {
            const auto* fm = c.attrs.find("fmod");
            const bool f = fm && fm->is_bool() && fm->get_bool();
            return "kiln_mod(" + c.a[0] + ", " + c.a[1] + ", " + (f ? "false" : "true") + ")";
        };
        m["max"] = [](const ctx& c) { return "kiln_max(" + c.a[0] + ", " + c.a[1] + ")"; };
        m["min"] = [](const ctx& c) { return "kiln_min(" + c.a[0] + ", " + c.a[1] + ")"; };
        m["prelu"] = [](const ctx& c) {
            return "(" + c.a[0] + " > 0.0f ? " + c.a[0] + " : " + c.a[0] + " * " + c.a[1] + ")";
        };
        m["swiglu"] = [](const ctx& c) {
            return "(" + c.a[0] + " * " + c.sigmoid(c.f("alpha", 1.0f) + " * " + c.a[0]) + " * " + c.a[1] + ")";
        };
        // Ternary.
        m["where"] = [](const ctx& c) { return "(" + c.a[0] + " ? " + c.a[1] + " : " + c.a[2] + ")"; };
        m["clip"] = [](const ctx& c) { return "kiln_min(kiln_max(" + c.a[0] + ", " + c.a[1] + "), " + c.a[2] + ")"; };
        m["convert"] = [](const ctx& c) {
            if (c.n.t == type::bool_) return "(" + c.a[0] + " != 0.0f)";
            return "((float)" + c.a[0] + ")";
        };
        return m;
    }();
    return r;
}

}  // namespace

std::string node_expression(const plan& p, std::size_t k) {
    const auto& n = p.nodes[k];
    auto it = rules().find(n.name);
    if (it == rules().end()) throw_error(error_code::unsupported, "fused kernel: no expression for " + n.name);
    ctx c{p, n, {}, n.op.to_value(), p.fast_math};
    for (auto a : n.args) c.a.push_back("v" + std::to_string(a));
    return it->second(c);
}

std::string constant_literal(const node& n) {
    char buf[64];
    switch (n.t) {
        case type::bool_: return n.value != 0 ? "true" : "false";
        case type::float32: {
            const float f = static_cast<float>(n.value);
            if (std::isnan(f)) return "__builtin_nanf(\"\")";
            if (std::isinf(f)) return f > 0 ? "__builtin_inff()" : "(-__builtin_inff())";
            std::snprintf(buf, sizeof buf, "%af", static_cast<double>(f));
            return buf;
        }
        case type::float64:
        case type::float16:
        case type::bfloat16:
            if (std::isnan(n.value)) return "__builtin_nan(\"\")";
            if (std::isinf(n.value)) return n.value > 0 ? "__builtin_inf()" : "(-__builtin_inf())";
            std::snprintf(buf, sizeof buf, "%a", n.value);
            return buf;
        default: std::snprintf(buf, sizeof buf, "%.17g", n.value); return buf;
    }
}

std::string value_type(const node& n) {
    if (n.kind == node_kind::constant && (n.t == type::float16 || n.t == type::bfloat16)) return "double";
    return c_type(n.t);
}

std::string c_type(type t) {
    switch (t) {
        case type::float32: return "float";
        case type::float64: return "double";
        case type::bool_: return "bool";
        case type::int8: return "signed char";
        case type::int16: return "short";
        case type::int32: return "int";
        case type::int64: return "long long";
        case type::uint8: return "unsigned char";
        case type::uint16: return "unsigned short";
        case type::uint32: return "unsigned int";
        case type::uint64: return "unsigned long long";
        // Storage structs of the gpu target's device header (kiln_device.h); the cpu target
        // widens 16-bit programs to float32 first, so its kernels never name them.
        case type::float16: return "kiln_half";
        case type::bfloat16: return "kiln_bf16";
        default: throw_error(error_code::unsupported, "fused kernel: no C type for " + std::string(type_name(t)));
    }
}

}  // namespace kiln::codegen
