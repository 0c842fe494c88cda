// simplify_algebra: IR before/after and reference results before/after on random
// non-zero data. The folds whose expected weights are easiest to state as text are in
// passes_simplify_algebra_text_test.cpp.
#include "passes/dead_code_elimination.hpp"
#include "passes/simplify_algebra.hpp"
#include "passes_test_util.hpp"

#include "ops/convert.hpp"
#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/normalization.hpp"
#include "ops/tensor_views.hpp"

#include <cmath>

using namespace kiln;
using passes_test::check_same_results;
using passes_test::positive_literal;
using passes_test::random_literal;

namespace {

shape f32(std::vector<std::size_t> lens) { return shape(type::float32, std::move(lens)); }
literal lit(std::vector<std::size_t> lens, std::vector<double> v) { return literal(f32(std::move(lens)), v); }

void simplify(module& m, bool fast_math = true) {
    simplify_algebra{fast_math}.apply(m);
    dead_code_elimination{}.apply(m);
}
void simplify_exact(module& m) { simplify(m, false); }

op::convolution conv_op(std::int64_t group = 1) {
    op::convolution c;
    c.padding = {1, 1, 1, 1};
    c.group = group;
    return c;
}

struct bn_params {
    literal scale, bias, mean, var;
    float eps = 1e-3f;
    // y = x*s + t per channel, in double as the reference computes it.
    std::vector<double> s() const {
        auto sc = scale.to_vector<double>(), v = var.to_vector<double>();
        std::vector<double> r;
        for (std::size_t c = 0; c < sc.size(); ++c) r.push_back(sc[c] / std::sqrt(v[c] + double(eps)));
        return r;
    }
    std::vector<double> t() const {
        auto b = bias.to_vector<double>(), mu = mean.to_vector<double>();
        auto sv = s();
        std::vector<double> r;
        for (std::size_t c = 0; c < sv.size(); ++c) r.push_back(b[c] - mu[c] * sv[c]);
        return r;
    }
};

bn_params make_bn(std::size_t c, unsigned seed) {
    return {random_literal(f32({c}), seed), random_literal(f32({c}), seed + 1), random_literal(f32({c}), seed + 2),
            positive_literal(f32({c}), seed + 3)};
}

instruction_ref add_bn(module& m, instruction_ref x, const bn_params& bn) {
    return m.add_instruction(op::batch_norm_inference{bn.eps},
                             {x, m.add_literal(bn.scale), m.add_literal(bn.bias), m.add_literal(bn.mean),
                              m.add_literal(bn.var)});
}

// Weights (M, C/group, k...) scaled per output channel.
std::vector<double> scaled_rows(const literal& w, const std::vector<double>& s) {
    auto v = w.to_vector<double>();
    const std::size_t per = v.size() / s.size();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] *= s[i / per];
    return v;
}

}  // namespace

TEST(simplify_algebra, batch_norm_folds_into_conv_with_bias) {
    program p;
    auto& m = *p.get_main_module();
    auto w = random_literal(f32({4, 3, 3, 3}), 1);
    auto b = random_literal(f32({4}), 2);
    auto bn = make_bn(4, 3);
    auto x = m.add_parameter("x", f32({1, 3, 5, 5}));
    auto c = m.add_instruction(conv_op(), {x, m.add_literal(w), m.add_literal(b)});
    m.add_return({add_bn(m, c, bn)});

    auto after = check_same_results(p, [](module& mm) { simplify(mm); }, 1e-5, 1e-5);

    auto s = bn.s(), t = bn.t();
    auto bv = b.to_vector<double>();
    std::vector<double> nb;
    for (std::size_t k = 0; k < 4; ++k) nb.push_back(bv[k] * s[k] + t[k]);
    module expected;
    auto ex = expected.add_parameter("x", f32({1, 3, 5, 5}));
    auto ew = expected.add_literal(lit({4, 3, 3, 3}, scaled_rows(w, s)));
    auto eb = expected.add_literal(lit({4}, nb));
    expected.add_return({expected.add_instruction(conv_op(), {ex, ew, eb})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_algebra, batch_norm_folds_into_grouped_conv_without_bias) {
    program p;
    auto& m = *p.get_main_module();
    auto w = random_literal(f32({4, 2, 3, 3}), 11);
    auto bn = make_bn(4, 12);
    auto x = m.add_parameter("x", f32({2, 4, 6, 6}));
    auto c = m.add_instruction(conv_op(2), {x, m.add_literal(w)});
    m.add_return({add_bn(m, c, bn)});
    auto after = check_same_results(p, [](module& mm) { simplify(mm); }, 1e-5, 1e-5);
    module expected;
    auto ex = expected.add_parameter("x", f32({2, 4, 6, 6}));
    auto ew = expected.add_literal(lit({4, 2, 3, 3}, scaled_rows(w, bn.s())));
    auto eb = expected.add_literal(lit({4}, bn.t()));
    expected.add_return({expected.add_instruction(conv_op(2), {ex, ew, eb})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_algebra, batch_norm_folds_into_grouped_deconvolution) {
    program p;
    auto& m = *p.get_main_module();
    op::deconvolution d;
    d.stride = {2, 2};
    d.group = 2;
    // w = (C=4, M/group=3, 2, 2): 6 output channels.
    auto w = random_literal(f32({4, 3, 2, 2}), 21);
    auto b = random_literal(f32({6}), 22);
    auto bn = make_bn(6, 23);
    auto x = m.add_parameter("x", f32({1, 4, 3, 3}));
    auto c = m.add_instruction(d, {x, m.add_literal(w), m.add_literal(b)});
    m.add_return({add_bn(m, c, bn)});
    auto after = check_same_results(p, [](module& mm) { simplify(mm); }, 1e-5, 1e-5);
    auto& am = *after.get_main_module();
    EXPECT_EQ(am.size(), 5u) << am;  // x, w', b', deconvolution, @return
    EXPECT_EQ(std::prev(am.end(), 2)->name(), "deconvolution") << am;
}

TEST(simplify_algebra, batch_norm_kept_when_conv_has_another_user_or_is_an_output) {
    for (bool as_output : {false, true}) {
        program p;
        auto& m = *p.get_main_module();
        auto x = m.add_parameter("x", f32({1, 3, 5, 5}));
        auto c = m.add_instruction(conv_op(), {x, m.add_literal(random_literal(f32({4, 3, 3, 3}), 1))});
        auto y = add_bn(m, c, make_bn(4, 5));
        if (as_output) {
            m.add_return({y, c});
        } else {
            auto r = m.add_instruction(make_op("relu"), {c});
            m.add_return({y, r});
        }
        std::string before = m.to_string();
        simplify(m);
        EXPECT_EQ(m.to_string(), before);
    }
}

TEST(simplify_algebra, batch_norm_folds_into_gemm_and_2d_matmul) {
    // gemm{alpha=0.5, beta=2, trans_b}(A, B, C) with C one value per column.
    {
        program p;
        auto& m = *p.get_main_module();
        op::gemm g{0.5f, 2.0f, false, true};
        auto a = m.add_parameter("a", f32({3, 5}));
        auto bw = random_literal(f32({4, 5}), 31);
        auto cw = random_literal(f32({1, 4}), 32);
        auto bn = make_bn(4, 33);
        auto y = m.add_instruction(g, {a, m.add_literal(bw), m.add_literal(cw)});
        m.add_return({add_bn(m, y, bn)});
        auto after = check_same_results(p, [](module& mm) { simplify(mm); }, 1e-5, 1e-5);
        auto s = bn.s(), t = bn.t();
        auto nb = bw.to_vector<double>();
        for (std::size_t i = 0; i < nb.size(); ++i) nb[i] *= s[i / 5];  // transposed B: rows are columns
        auto cv = cw.to_vector<double>();
        std::vector<double> nc;
        for (std::size_t j = 0; j < 4; ++j) nc.push_back(2.0 * cv[j] * s[j] + t[j]);
        module expected;
        auto ea = expected.add_parameter("a", f32({3, 5}));
        auto eb = expected.add_literal(lit({4, 5}, nb));
        auto ec = expected.add_literal(lit({4}, nc));
        expected.add_return({expected.add_instruction(op::gemm{0.5f, 1.0f, false, true}, {ea, eb, ec})});
        EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
    }
    // matmul(A, B) -> gemm(A, B*s, t)
    {
        program p;
        auto& m = *p.get_main_module();
        auto a = m.add_parameter("a", f32({2, 3}));
        auto bw = random_literal(f32({3, 4}), 41);
        auto bn = make_bn(4, 42);
        auto y = m.add_instruction(op::matmul{}, {a, m.add_literal(bw)});
        m.add_return({add_bn(m, y, bn)});
        auto after = check_same_results(p, [](module& mm) { simplify(mm); }, 1e-5, 1e-5);
        auto s = bn.s();
        auto nb = bw.to_vector<double>();
        for (std::size_t i = 0; i < nb.size(); ++i) nb[i] *= s[i % 4];
        module expected;
        auto ea = expected.add_parameter("a", f32({2, 3}));
        auto eb = expected.add_literal(lit({3, 4}, nb));
        auto ec = expected.add_literal(lit({4}, bn.t()));
        expected.add_return({expected.add_instruction(op::gemm{1.0f, 1.0f, false, false}, {ea, eb, ec})});
        EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
    }
}

TEST(simplify_algebra, division_by_constant) {
    auto build = [](double c, type t) {
        program p;
        auto& m = *p.get_main_module();
        auto x = m.add_parameter("x", shape(t, {2, 3}));
        m.add_return({m.add_instruction(make_op("div"), {x, m.add_literal(literal(shape(t, {1}), std::vector<double>{c}))})});
        return p;
    };
    auto expect_mul_by = [](const program& q, double r) {
        auto& am = *q.get_main_module();
        ASSERT_EQ(am.size(), 4u) << am;
        auto mul = std::prev(am.end(), 2);
        EXPECT_EQ(mul->name(), "mul") << am;
        EXPECT_EQ(mul->inputs()[1]->get_literal().to_vector<double>(), std::vector<double>{r});
    };
    // Power of two: exact, done even without fast_math, bit-identical results.
    for (type t : {type::float32, type::float16}) {
        auto after = check_same_results(build(4.0, t), simplify_exact, 0, 0);
        expect_mul_by(after, 0.25);
    }
    // Not a power of two: x*(1/3) may differ from x/3 by an ulp, so only under fast_math.
    auto p3 = build(3.0, type::float32);
    auto after = check_same_results(p3, [](module& mm) { simplify(mm); }, 2e-7, 0);
    expect_mul_by(after, double(1.0f / 3.0f));
    auto exact = check_same_results(p3, simplify_exact, 0, 0);
    EXPECT_EQ(*exact.get_main_module(), *p3.get_main_module());
    // float16 with a rounded reciprocal: never.
    auto h = build(3.0, type::float16);
    auto kept = check_same_results(h, [](module& mm) { simplify(mm); }, 0, 0);
    EXPECT_EQ(*kept.get_main_module(), *h.get_main_module());
    // Integer division truncates: never.
    auto ip = build(4.0, type::int32);
    auto ik = check_same_results(ip, [](module& mm) { simplify(mm); }, 0, 0);
    EXPECT_EQ(*ik.get_main_module(), *ip.get_main_module());
}

TEST(simplify_algebra, identities_that_change_the_result_stay) {
    // x*1 broadcasting x to a larger shape; x + (+0), which turns -0 into +0, without
    // fast_math; a cast to another type; a transpose that moves data.
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 3}));
    auto a = m.add_instruction(make_op("mul"), {x, m.add_literal(lit({4, 1, 1}, {1, 1, 1, 1}))});
    auto b = m.add_instruction(make_op("add"), {x, m.add_literal(lit({1}, {0.0}))});
    auto c = m.add_instruction(op::convert_op{type::float64}, {x});
    auto d = m.add_instruction(op::transpose{{1, 0}}, {x});
    m.add_return({a, b, c, d});
    std::string before = m.to_string();
    simplify_exact(m);
    EXPECT_EQ(m.to_string(), before);
    // x + (+0) goes under fast_math.
    simplify(m);
    EXPECT_EQ(std::prev(m.end())->inputs()[1], x) << m;
}

TEST(simplify_algebra, scalar_scale_of_a_matmul_operand_moves_after_the_matmul) {
    // Attention's q * 0.125 before q x k^T: a power of two moves exactly (bit-identical
    // results); 0.3 moves only under fast_math.
    for (double c : {0.125, 0.3}) {
        for (bool fast : {true, false}) {
            program p;
            auto& m = *p.get_main_module();
            auto q = m.add_parameter("q", f32({2, 5, 4}));
            auto k = m.add_parameter("k", f32({2, 4, 6}));
            auto qs = m.add_instruction(make_op("mul"), {m.add_literal(lit({}, {c})), q});
            m.add_return({m.add_instruction(op::matmul{}, {qs, k})});
            const bool moves = c == 0.125 || fast;
            auto after = check_same_results(p, [&](module& mm) { simplify(mm, fast); }, moves && c != 0.125 ? 1e-5 : 0,
                                            moves && c != 0.125 ? 1e-6 : 0);
            const auto& am = *after.get_main_module();
            auto ret = std::prev(am.end());
            auto out = ret->inputs().front();
            EXPECT_EQ(out->name(), moves ? "mul" : "matmul") << am;
            if (moves) {
                EXPECT_EQ(out->inputs().front()->name(), "matmul") << am;
            }
        }
    }
}
