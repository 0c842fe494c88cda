// Helpers for the pass tests: random non-zero inputs, and running a program before and
// after a pass with the reference evaluator.
#pragma once
#include "pass_text_util.hpp"

#include <kiln/literal.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace kiln::passes_test {

// Uniform in [0.5, 1.5] with a random sign: never zero, never tiny.
inline std::vector<double> random_values(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> mag(0.5, 1.5);
    std::bernoulli_distribution neg(0.5);
    std::vector<double> v(n);
    for (auto& x : v) x = neg(gen) ? -mag(gen) : mag(gen);
    return v;
}

inline literal random_literal(const shape& s, unsigned seed) { return literal(s, random_values(s.elements(), seed)); }

// Positive values in [0.5, 1.5] (variances).
inline literal positive_literal(const shape& s, unsigned seed) {
    auto v = random_values(s.elements(), seed);
    for (auto& x : v) x = std::fabs(x);
    return literal(s, v);
}

// Random data for every parameter of the main module.
inline param_map random_inputs(const program& p, unsigned seed = 7) {
    param_map in;
    for (auto& [name, s] : p.get_parameter_shapes()) in[name] = random_literal(s, seed++).get_argument();
    return in;
}

// |a - b| <= atol + rtol * |b| elementwise; shapes (lens) equal.
inline void expect_close(const argument& a, const argument& b, double rtol = 1e-5, double atol = 1e-6) {
    ASSERT_EQ(a.get_shape().lens(), b.get_shape().lens());
    auto x = a.to_vector<double>();
    auto y = b.to_vector<double>();
    for (std::size_t i = 0; i < x.size(); ++i)
        ASSERT_LE(std::fabs(x[i] - y[i]), atol + rtol * std::fabs(y[i])) << "element " << i;
}

// Runs `pass_fn` on a copy of p's main module and checks that reference evaluation on
// random non-zero inputs gives the same numbers before and after (bitwise when
// rtol is 0). Returns the program after the pass. Both programs' text forms must also
// read back (every module these tests build is a round trip test of the text form).
inline program check_same_results(const program& p, const std::function<void(module&)>& pass_fn,
                                  double rtol = 1e-5, double atol = 1e-6) {
    program after = p;
    pass_fn(*after.get_main_module());
    after.get_main_module()->validate();
    pass_text::expect_text_round_trip(p);
    pass_text::expect_text_round_trip(after);
    auto in = random_inputs(p);
    auto r0 = p.eval(in);
    auto r1 = after.eval(in);
    EXPECT_EQ(r0.size(), r1.size());
    for (std::size_t i = 0; i < r0.size() && i < r1.size(); ++i) {
        if (rtol == 0 && atol == 0) {
            EXPECT_TRUE(r0[i] == r1[i]) << "output " << i << ": " << r0[i].to_string() << " vs " << r1[i].to_string();
        } else {
            expect_close(r1[i], r0[i], rtol, atol);
        }
    }
    return after;
}

}  // namespace kiln::passes_test
