// Helpers for the nn family's op tests: random tensors, running one op the way the
// evaluator does (compute_shape, then compute), and comparing against a reference.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/context.hpp>
#include <kiln/literal.hpp>
#include <kiln/operation.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace kiln::test_nn {

inline std::mt19937& rng() {
    static std::mt19937 g(1234);
    return g;
}

// Uniform in [-1, -0.05] U [0.05, 1]: random and never zero.
inline std::vector<float> random_values(std::size_t n, float scale = 1.0f) {
    std::uniform_real_distribution<float> u(0.05f, 1.0f);
    std::bernoulli_distribution sign(0.5);
    std::vector<float> v(n);
    for (auto& x : v) x = scale * (sign(rng()) ? u(rng()) : -u(rng()));
    return v;
}

inline std::vector<int> random_ints(std::size_t n, int lo, int hi) {
    std::uniform_int_distribution<int> u(lo, hi);
    std::vector<int> v(n);
    for (auto& x : v) x = u(rng());
    return v;
}

template <class T>
argument make_arg(type t, std::vector<std::size_t> lens, const std::vector<T>& values) {
    return literal(shape(t, std::move(lens)), values).get_argument();
}

inline argument random_arg(type t, std::vector<std::size_t> lens, float scale = 1.0f) {
    shape s(t, lens);
    return make_arg(t, lens, random_values(s.elements(), scale));
}

inline shape shape_of(const operation& op, const std::vector<argument>& args) {
    std::vector<shape> in;
    for (auto& a : args) in.push_back(a.get_shape());
    return op.compute_shape(in);
}

inline argument run(const operation& op, const std::vector<argument>& args) {
    host_context ctx;
    return op.compute(ctx, shape_of(op, args), args);
}

// max |a - b| <= atol + rtol * |b| elementwise, with the first offender reported.
inline void expect_near(const argument& actual, const std::vector<double>& expected, double rtol = 1e-5,
                        double atol = 1e-5) {
    auto a = actual.to_vector<double>();
    ASSERT_EQ(a.size(), expected.size());
    for (std::size_t i = 0; i < a.size(); ++i)
        ASSERT_LE(std::fabs(a[i] - expected[i]), atol + rtol * std::fabs(expected[i]))
            << "element " << i << ": " << a[i] << " vs expected " << expected[i];
}

// Expects op.compute_shape on `inputs` to throw a kiln error with `code`.
inline void expect_shape_error(const operation& op, const std::vector<shape>& inputs, error_code code) {
    try {
        op.compute_shape(inputs);
        ADD_FAILURE() << op.name() << " accepted bad inputs";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), code) << e.what();
        EXPECT_NE(std::string(e.what()).find(op.name()), std::string::npos) << e.what();
    }
}

// Row-major flat index of a multi-index.
inline std::size_t flat(const std::vector<std::size_t>& lens, const std::vector<std::size_t>& idx) {
    std::size_t f = 0;
    for (std::size_t i = 0; i < lens.size(); ++i) f = f * lens[i] + idx[i];
    return f;
}

}  // namespace kiln::test_nn
