// Helpers for the fusion and fused-kernel tests: programs spelled out the way exporters
// write them, random inputs, environment overrides and comparisons against `ref`.
#pragma once
#include "env_override.hpp"
#include "ops/fused.hpp"
#include "ops_run.hpp"
#include "targets/cpu/codegen/compiler.hpp"
#include "targets/cpu/codegen/kernel_op.hpp"

#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kiln::test {


// A fresh folder (removed at the end), used as KILN_CACHE_DIR while it lives.
struct scratch_cache {
    std::filesystem::path path;
    std::optional<env_override> env;
    scratch_cache() {
        static int counter = 0;
        path = std::filesystem::temp_directory_path() /
               ("kiln_codegen_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path);
        std::filesystem::create_directories(path);
        env.emplace("KILN_CACHE_DIR", path.c_str());
    }
    ~scratch_cache() {
        env.reset();
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::vector<std::filesystem::path> files(const std::string& ext) const {
        std::vector<std::filesystem::path> out;
        for (auto& e : std::filesystem::directory_iterator(path))
            if (e.path().extension() == ext) out.push_back(e.path());
        return out;
    }
};

inline argument random_arg(const shape& s, unsigned seed, float lo = -2.0f, float hi = 2.0f) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(s.elements());
    for (auto& x : v) {
        x = d(gen);
        if (x == 0.0f) x = 0.5f;
    }
    return literal(s, v).get_argument();
}

inline instruction_ref scalar(module& m, float v) { return m.add_literal(literal(shape(type::float32, {1}), std::vector<float>{v})); }

inline instruction_ref add_op(module& m, const std::string& name, std::vector<instruction_ref> args, const value& attrs = value::make_object()) {
    return m.add_instruction(make_op(name, attrs), std::move(args));
}

inline value reduce_attrs(std::vector<std::int64_t> axes, bool keepdims = true) {
    value::array a;
    for (auto x : axes) a.push_back(x);
    value v = value::make_object();
    v["axes"] = value(a);
    v["keepdims"] = keepdims;
    return v;
}

// LayerNorm over the last axis as PyTorch exports it at opset 13.
inline instruction_ref layer_norm(module& m, instruction_ref x, instruction_ref scale, instruction_ref bias) {
    const auto last = static_cast<std::int64_t>(x->get_shape().ndim()) - 1;
    auto mean = add_op(m, "reduce_mean", {x}, reduce_attrs({last}));
    auto d = add_op(m, "sub", {x, mean});
    auto sq = add_op(m, "pow", {d, scalar(m, 2.0f)});
    auto var = add_op(m, "reduce_mean", {sq}, reduce_attrs({last}));
    auto ve = add_op(m, "add", {var, scalar(m, 1e-5f)});
    auto sd = add_op(m, "sqrt", {ve});
    auto n = add_op(m, "div", {d, sd});
    auto sc = add_op(m, "mul", {n, scale});
    return add_op(m, "add", {sc, bias});
}

// Softmax over the last axis spelled out: exp(x - max) / sum.
inline instruction_ref softmax(module& m, instruction_ref x) {
    const auto last = static_cast<std::int64_t>(x->get_shape().ndim()) - 1;
    auto mx = add_op(m, "reduce_max", {x}, reduce_attrs({last}));
    auto e = add_op(m, "exp", {add_op(m, "sub", {x, mx})});
    auto s = add_op(m, "reduce_sum", {e}, reduce_attrs({last}));
    return add_op(m, "div", {e, s});
}

// The erf GELU as exported: x * (1 + erf(x / sqrt 2)) * 0.5.
inline instruction_ref gelu(module& m, instruction_ref x) {
    auto d = add_op(m, "div", {x, scalar(m, 1.41421356f)});
    auto e = add_op(m, "erf", {d});
    auto a = add_op(m, "add", {e, scalar(m, 1.0f)});
    auto mu = add_op(m, "mul", {x, a});
    return add_op(m, "mul", {mu, scalar(m, 0.5f)});
}

inline instruction_ref silu(module& m, instruction_ref x) { return add_op(m, "mul", {x, add_op(m, "sigmoid", {x})}); }

inline std::size_t count_ops(const module& m, const std::string& name) {
    std::size_t n = 0;
    for (auto& ins : m)
        if (ins.name() == name) ++n;
    return n;
}

inline std::vector<std::string> kernel_modes(const program& p) {
    std::vector<std::string> out;
    for (auto& ins : *p.get_main_module())
        if (ins.name() == "cpu::fused_kernel") out.push_back(cpu::kernel_mode(ins.get_operator()));
    return out;
}

// The generated kernels on their own: the oneDNN lowering (which would take single
// elementwise ops first) is off while compiling for cpu.
inline program compiled(const program& p, const std::string& target, bool fast_math) {
    program c = p;
    compile_options o;
    o.fast_math = fast_math;
    env_override no_dnnl("KILN_CPU_DNNL", "0");
    c.compile(*get_target(target), o);
    return c;
}

// Max relative error |a - b| / max(|b|, floor), and NaNs / infinities matching.
inline void expect_close(const argument& got, const argument& want, double rtol, double floor = 1e-6) {
    auto a = got.to_vector<float>();
    auto b = want.to_vector<float>();
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    std::size_t at = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (std::isnan(b[i]) || std::isinf(b[i])) {
            EXPECT_EQ(std::isnan(a[i]), std::isnan(b[i])) << "at " << i;
            if (std::isinf(b[i])) {
                EXPECT_EQ(a[i], b[i]) << "at " << i;
            }
            continue;
        }
        const double e = std::fabs(double(a[i]) - double(b[i])) / std::max(std::fabs(double(b[i])), floor);
        if (e > worst) {
            worst = e;
            at = i;
        }
    }
    EXPECT_LE(worst, rtol) << "worst at " << at << ": " << a[at] << " vs " << b[at];
}

}  // namespace kiln::test
