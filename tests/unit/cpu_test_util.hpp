// Helpers for the cpu target's tests: build a small program from registered ops, run it
// on `ref` (the oracle) and on `cpu`, and compare.
#pragma once
#include "env_override.hpp"
#include <cstdlib>
#include <optional>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::cpu_test {

inline std::mt19937& rng() {
    static std::mt19937 g(4242);
    return g;
}

// Uniform in [-1, -0.05] U [0.05, 1], times scale: random and never zero.
inline std::vector<float> random_values(std::size_t n, float scale = 1.0f) {
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    std::bernoulli_distribution sign(0.5);
    std::vector<float> v(n);
    for (auto& x : v) x = scale * (sign(rng()) ? u(rng()) : -u(rng()));
    return v;
}

inline literal random_literal(const std::vector<std::size_t>& lens, float scale = 1.0f) {
    shape s(type::float32, lens);
    return literal(s, random_values(s.elements(), scale));
}

// Uniform integers in [lo, hi] as a literal of integer type t (quantized operands).
inline literal random_ints(type t, std::vector<std::size_t> lens, int lo, int hi) {
    shape s(t, std::move(lens));
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<double> v(s.elements());
    for (auto& x : v) x = d(rng());
    return literal(s, v);
}

// Skips the test when an op family it needs is not in this build.
#define KILN_CPU_NEEDS_OPS(...)                                                         \
    for (const char* op_name_ : {__VA_ARGS__})                                          \
        if (!::kiln::has_op(op_name_)) GTEST_SKIP() << "op '" << op_name_ << "' is not in this build";

struct builder {
    program p;
    module* m = p.get_main_module();
    param_map inputs;

    instruction_ref param(const std::string& name, const std::vector<std::size_t>& lens, float scale = 1.0f) {
        auto l = random_literal(lens, scale);
        inputs[name] = l.get_argument();
        return m->add_parameter(name, l.get_shape());
    }
    instruction_ref constant(const std::vector<std::size_t>& lens, float scale = 1.0f) {
        return m->add_literal(random_literal(lens, scale));
    }
    instruction_ref scalar(float v) { return m->add_literal(literal(shape(type::float32), std::vector<float>{v})); }
    instruction_ref op(const std::string& name, const value& attrs, std::vector<instruction_ref> args) {
        return m->add_instruction(make_op(name, attrs), std::move(args));
    }
    instruction_ref op(const std::string& name, std::vector<instruction_ref> args) {
        return op(name, value::make_object(), std::move(args));
    }
    void ret(std::vector<instruction_ref> outs) { m->add_return(std::move(outs)); }
};

// max |a - e| <= atol + rtol * |e|, reporting the first offender.
inline void expect_close(const argument& actual, const argument& expected, double rtol = 1e-4, double atol = 1e-5,
                         const std::string& what = "") {
    ASSERT_EQ(actual.get_shape().lens(), expected.get_shape().lens()) << what;
    auto a = actual.to_vector<double>();
    auto e = expected.to_vector<double>();
    for (std::size_t i = 0; i < e.size(); ++i)
        ASSERT_LE(std::fabs(a[i] - e[i]), atol + rtol * std::fabs(e[i]))
            << what << " element " << i << ": cpu " << a[i] << " vs ref " << e[i];
}

inline std::size_t count_ops(const program& p, const std::string& name) {
    std::size_t n = 0;
    for (const auto& ins : *p.get_main_module()) n += ins.name() == name ? 1 : 0;
    return n;
}

// The first instruction of p's main module whose op is an Op (nullptr when none).
template <class Op>
const instruction* first_of(const program& p) {
    for (const auto& ins : *p.get_main_module())
        if (ins.get_operator().any_cast<Op>()) return &ins;
    return nullptr;
}

// Whether `ins` exists and its op is an Op.
template <class Op>
bool runs(const instruction* ins) {
    return ins && ins->get_operator().any_cast<Op>() != nullptr;
}

// `s` with every `from` replaced by `to` (module texts with placeholders).
inline std::string replaced(std::string s, const std::string& from, const std::string& to) {
    for (auto p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
    return s;
}

// Ops that still run on reference kernels (what the cpu lowering did not take).
inline std::vector<std::string> ref_kernels(const program& p) {
    std::vector<std::string> out;
    for (const auto& ins : *p.get_main_module())
        if (ins.name() == "ref::kernel") out.push_back(ins.get_operator().to_string());
    return out;
}

struct both {
    program ref, cpu;
    std::vector<argument> ref_out, cpu_out;
};

// Compiles copies of b.p for ref and cpu, runs both on b.inputs and compares every output.
// These tests are about the oneDNN lowering, so elementwise grouping into generated kernels
// (which would take chains before oneDNN sees them) is off while compiling.
inline both run_both(const builder& b, double rtol = 1e-4, double atol = 1e-5, compile_options opts = {}) {
    both r{b.p, b.p, {}, {}};
    r.ref.compile(*get_target("ref"));
    {
        test::env_override no_grouping("KILN_CPU_FUSION", "0");
        r.cpu.compile(*get_target("cpu"), opts);
    }
    r.ref_out = r.ref.eval(b.inputs);
    r.cpu_out = r.cpu.eval(b.inputs);
    EXPECT_EQ(r.ref_out.size(), r.cpu_out.size());
    for (std::size_t i = 0; i < r.ref_out.size() && i < r.cpu_out.size(); ++i) {
        EXPECT_TRUE(r.cpu_out[i].get_shape().standard()) << "output " << i << " " << r.cpu_out[i].get_shape();
        expect_close(r.cpu_out[i], r.ref_out[i], rtol, atol, "output " + std::to_string(i));
    }
    return r;
}

inline std::string text(const program& p) {
    std::ostringstream os;
    os << *p.get_main_module();
    return os.str();
}

}  // namespace kiln::cpu_test
