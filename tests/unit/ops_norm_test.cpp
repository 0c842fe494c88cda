// Reductions, softmax, normalization, losses and attention: each op on small, odd-sized
// random data against a direct computation written out in the test, plus error cases.
#include "ops/attention.hpp"
#include "ops/loss.hpp"
#include "ops/normalization.hpp"
#include "ops/reduce.hpp"
#include "ops/softmax.hpp"

#include <kiln/program.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

std::vector<float> random_values(std::size_t n, unsigned seed, float lo = -2.0f, float hi = 2.0f) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) {
        x = d(gen);
        if (x == 0.0f) x = 0.5f;
    }
    return v;
}

argument make_arg(const shape& s, const std::vector<float>& v) { return literal(s, v).get_argument(); }

// Evaluates one op on the given inputs through a compiled ref program.
std::vector<argument> run_op(const operation& op, const std::vector<argument>& inputs) {
    program p;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> params;
    param_map pm;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const std::string n = "x" + std::to_string(i);
        params.push_back(m->add_parameter(n, inputs[i].get_shape()));
        pm[n] = inputs[i];
    }
    auto r = m->add_instruction(op, params);
    m->add_return({r});
    p.compile(*get_target("ref"));
    auto out = p.eval(pm);
    if (out[0].get_shape().is_tuple()) return out[0].elements();
    return out;
}

void expect_near_all(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "at " << i;
}

}  // namespace

TEST(ops_norm, reduce_static_axes_keepdims) {
    const std::size_t A = 3, B = 4, C = 5;
    shape s(type::float32, {A, B, C});
    auto x = random_values(A * B * C, 1);
    op::reduce_sum sum;
    sum.axes = {0, 2};
    auto r = run_op(sum, {make_arg(s, x)});
    EXPECT_EQ(r[0].get_shape().lens(), (std::vector<std::size_t>{1, B, 1}));
    op::reduce_log_sum_exp lse;
    lse.axes = {0, 2};
    lse.keepdims = false;
    auto r2 = run_op(lse, {make_arg(s, x)});
    EXPECT_EQ(r2[0].get_shape().lens(), (std::vector<std::size_t>{B}));
    op::reduce_max mx;
    mx.axes = {1};
    auto r3 = run_op(mx, {make_arg(s, x)});
    std::vector<double> want_sum(B, 0), want_lse(B, 0), want_max(A * C, -1e30);
    for (std::size_t a = 0; a < A; ++a)
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t c = 0; c < C; ++c) {
                const double v = x[(a * B + b) * C + c];
                want_sum[b] += v;
                want_lse[b] += std::exp(v);
                want_max[a * C + c] = std::max(want_max[a * C + c], v);
            }
    for (auto& v : want_lse) v = std::log(v);
    expect_near_all(r[0].to_vector<float>(), want_sum);
    expect_near_all(r2[0].to_vector<float>(), want_lse);
    expect_near_all(r3[0].to_vector<float>(), want_max);
}

TEST(ops_norm, reduce_runtime_axes_and_noop) {
    shape s(type::float32, {3, 5});
    auto x = random_values(15, 2);
    op::reduce_l2 l2;
    l2.keepdims = false;
    auto axes = literal(shape(type::int64, {1}), std::vector<std::int64_t>{-1}).get_argument();
    auto r = run_op(l2, {make_arg(s, x), axes});
    ASSERT_EQ(r[0].get_shape().lens(), (std::vector<std::size_t>{3}));
    std::vector<double> want(3, 0);
    for (std::size_t i = 0; i < 15; ++i) want[i / 5] += double(x[i]) * x[i];
    for (auto& v : want) v = std::sqrt(v);
    expect_near_all(r[0].to_vector<float>(), want);
    // Empty axes with noop_with_empty_axes: an element-wise "reduction" over nothing.
    op::reduce_sum_square sq;
    sq.noop_with_empty_axes = true;
    auto none = argument(shape(type::int64, {0}));
    auto r2 = run_op(sq, {make_arg(s, x), none});
    std::vector<double> want2(x.begin(), x.end());
    for (auto& v : want2) v *= v;
    expect_near_all(r2[0].to_vector<float>(), want2);
}

TEST(ops_norm, reduce_integer_and_empty) {
    shape s(type::int64, {2, 3});
    auto x = literal(s, std::vector<std::int64_t>{4000000000000LL, -7, 3, 1, 2, 5}).get_argument();
    op::reduce_sum sum;
    sum.axes = {1};
    EXPECT_EQ(run_op(sum, {x})[0].to_vector<std::int64_t>(), (std::vector<std::int64_t>{3999999999996LL, 8}));
    op::reduce_prod prod;
    prod.axes = {0};
    EXPECT_EQ(run_op(prod, {x})[0].to_vector<std::int64_t>(), (std::vector<std::int64_t>{4000000000000LL, -14, 15}));
    op::reduce_min mn;
    mn.axes = {1};
    auto e = argument(shape(type::float32, {2, 0}));
    auto r = run_op(mn, {e})[0].to_vector<float>();
    ASSERT_EQ(r.size(), 2u);
    EXPECT_TRUE(std::isinf(r[0]) && r[0] > 0);
}

TEST(ops_norm, softmax_family) {
    const std::size_t A = 3, B = 4, C = 5;
    shape s(type::float32, {A, B, C});
    auto x = random_values(A * B * C, 3);
    std::vector<double> sm(x.size()), lsm(x.size()), hm(x.size());
    for (std::size_t a = 0; a < A; ++a)
        for (std::size_t c = 0; c < C; ++c) {
            double tot = 0;
            std::size_t best = 0;
            for (std::size_t b = 0; b < B; ++b) {
                tot += std::exp(double(x[(a * B + b) * C + c]));
                if (x[(a * B + b) * C + c] > x[(a * B + best) * C + c]) best = b;
            }
            for (std::size_t b = 0; b < B; ++b) {
                const std::size_t i = (a * B + b) * C + c;
                sm[i] = std::exp(double(x[i])) / tot;
                lsm[i] = double(x[i]) - std::log(tot);
                hm[i] = b == best ? 1.0 : 0.0;
            }
        }
    op::softmax s1;
    s1.axis = 1;
    op::log_softmax s2;
    s2.axis = 1;
    op::hardmax s3;
    s3.axis = 1;
    expect_near_all(run_op(s1, {make_arg(s, x)})[0].to_vector<float>(), sm);
    expect_near_all(run_op(s2, {make_arg(s, x)})[0].to_vector<float>(), lsm);
    expect_near_all(run_op(s3, {make_arg(s, x)})[0].to_vector<float>(), hm);
    s1.axis = 3;
    EXPECT_THROW(run_op(s1, {make_arg(s, x)}), error);
}

TEST(ops_norm, layer_norm_and_stats) {
    const std::size_t R = 3, C = 7;
    shape s(type::float32, {R, C});
    auto x = random_values(R * C, 4);
    auto w = random_values(C, 5);
    auto b = random_values(C, 6);
    op::layer_norm ln{1, 1e-3f};
    auto y = run_op(ln, {make_arg(s, x), make_arg(shape(type::float32, {C}), w), make_arg(shape(type::float32, {C}), b)});
    auto st = run_op(op::layer_norm_stats{1, 1e-3f}, {make_arg(s, x)});
    std::vector<double> want(R * C), means(R), invs(R);
    for (std::size_t r = 0; r < R; ++r) {
        double m = 0, v = 0;
        for (std::size_t c = 0; c < C; ++c) m += x[r * C + c];
        m /= C;
        for (std::size_t c = 0; c < C; ++c) v += (x[r * C + c] - m) * (x[r * C + c] - m);
        v /= C;
        means[r] = m;
        invs[r] = 1 / std::sqrt(v + 1e-3);
        for (std::size_t c = 0; c < C; ++c) want[r * C + c] = (x[r * C + c] - m) * invs[r] * w[c] + b[c];
    }
    expect_near_all(y[0].to_vector<float>(), want);
    ASSERT_EQ(st.size(), 2u);
    EXPECT_EQ(st[0].get_shape().lens(), (std::vector<std::size_t>{R, 1}));
    expect_near_all(st[0].to_vector<float>(), means);
    expect_near_all(st[1].to_vector<float>(), invs);
    // Scale of the wrong length is a shape error naming the op.
    try {
        run_op(ln, {make_arg(s, x), make_arg(shape(type::float32, {C - 1}), random_values(C - 1, 7))});
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("layer_norm"), std::string::npos);
    }
}

TEST(ops_norm, batch_group_instance_norm) {
    const std::size_t N = 2, C = 4, S = 3;
    shape s(type::float32, {N, C, S});
    shape pc(type::float32, {C});
    auto x = random_values(N * C * S, 8);
    auto sc = random_values(C, 9);
    auto bi = random_values(C, 10);
    auto mean = random_values(C, 11);
    auto var = random_values(C, 12, 0.5f, 2.0f);
    auto y = run_op(op::batch_norm_inference{1e-5f},
                    {make_arg(s, x), make_arg(pc, sc), make_arg(pc, bi), make_arg(pc, mean), make_arg(pc, var)});
    std::vector<double> want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const std::size_t c = (i / S) % C;
        want[i] = (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * sc[c] + bi[c];
    }
    expect_near_all(y[0].to_vector<float>(), want);
    // Two groups of two channels each.
    op::group_norm gn;
    gn.num_groups = 2;
    auto g = run_op(gn, {make_arg(s, x), make_arg(pc, sc), make_arg(pc, bi)});
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t grp = 0; grp < 2; ++grp) {
            double m = 0, v = 0;
            for (std::size_t i = 0; i < 2 * S; ++i) m += x[(n * C + grp * 2) * S + i];
            m /= 2 * S;
            for (std::size_t i = 0; i < 2 * S; ++i) v += std::pow(x[(n * C + grp * 2) * S + i] - m, 2);
            v /= 2 * S;
            for (std::size_t i = 0; i < 2 * S; ++i) {
                const std::size_t at = (n * C + grp * 2) * S + i;
                const std::size_t c = grp * 2 + i / S;
                want[at] = (x[at] - m) / std::sqrt(v + 1e-5) * sc[c] + bi[c];
            }
        }
    expect_near_all(g[0].to_vector<float>(), want);
    gn.num_groups = 3;
    EXPECT_THROW(run_op(gn, {make_arg(s, x), make_arg(pc, sc), make_arg(pc, bi)}), error);
}

TEST(ops_norm, nll_loss_weights_and_ignore_index) {
    const std::size_t N = 3, C = 4, D = 2;
    auto x = random_values(N * C * D, 13);
    auto w = random_values(C, 14, 0.2f, 1.0f);
    std::vector<std::int64_t> t{0, 3, 1, 2, 2, 1};
    op::nll_loss nll;
    nll.ignore_index = 2;
    auto r = run_op(nll, {make_arg(shape(type::float32, {N, C, D}), x),
                          literal(shape(type::int64, {N, D}), t).get_argument(),
                          make_arg(shape(type::float32, {C}), w)});
    double num = 0, den = 0;
    for (std::size_t n = 0; n < N; ++n)
        for (std::size_t d = 0; d < D; ++d) {
            auto c = static_cast<std::size_t>(t[n * D + d]);
            if (c == 2) continue;
            num += -x[(n * C + c) * D + d] * w[c];
            den += w[c];
        }
    expect_near_all(r[0].to_vector<float>(), {num / den});
    t[0] = 7;  // out of range and not ignored
    EXPECT_THROW(run_op(nll, {make_arg(shape(type::float32, {N, C, D}), x),
                              literal(shape(type::int64, {N, D}), t).get_argument(),
                              make_arg(shape(type::float32, {C}), w)}),
                 error);
}

TEST(ops_norm, attention_gqa_causal_with_past) {
    const std::size_t B = 1, Hq = 4, Hkv = 2, L = 3, P = 2, D = 5;
    const std::size_t T = P + L;
    auto q = random_values(B * Hq * L * D, 15);
    auto k = random_values(B * Hkv * L * D, 16);
    auto v = random_values(B * Hkv * L * D, 17);
    auto pk = random_values(B * Hkv * P * D, 18);
    auto pv = random_values(B * Hkv * P * D, 19);
    op::attention a;
    a.is_causal = true;
    a.has_past = true;
    auto r = run_op(a, {make_arg(shape(type::float32, {B, Hq, L, D}), q), make_arg(shape(type::float32, {B, Hkv, L, D}), k),
                        make_arg(shape(type::float32, {B, Hkv, L, D}), v), make_arg(shape(type::float32, {B, Hkv, P, D}), pk),
                        make_arg(shape(type::float32, {B, Hkv, P, D}), pv)});
    ASSERT_EQ(r.size(), 4u);
    EXPECT_EQ(r[1].get_shape().lens(), (std::vector<std::size_t>{B, Hkv, T, D}));
    auto key = [&](std::size_t h, std::size_t j, std::size_t x) {
        return j < P ? pk[(h * P + j) * D + x] : k[(h * L + j - P) * D + x];
    };
    auto val = [&](std::size_t h, std::size_t j, std::size_t x) {
        return j < P ? pv[(h * P + j) * D + x] : v[(h * L + j - P) * D + x];
    };
    std::vector<double> want(Hq * L * D);
    for (std::size_t h = 0; h < Hq; ++h)
        for (std::size_t i = 0; i < L; ++i) {
            std::vector<double> p;
            double tot = 0;
            for (std::size_t j = 0; j <= i + P; ++j) {  // causal: keys up to i + past
                double dot = 0;
                for (std::size_t x = 0; x < D; ++x) dot += q[(h * L + i) * D + x] * key(h / 2, j, x);
                p.push_back(std::exp(dot / std::sqrt(double(D))));
                tot += p.back();
            }
            for (std::size_t x = 0; x < D; ++x) {
                double acc = 0;
                for (std::size_t j = 0; j < p.size(); ++j) acc += p[j] / tot * val(h / 2, j, x);
                want[(h * L + i) * D + x] = acc;
            }
        }
    expect_near_all(r[0].to_vector<float>(), want);
    // Three query heads cannot share two KV heads.
    EXPECT_THROW(run_op(op::attention{}, {make_arg(shape(type::float32, {1, 3, 2, 4}), random_values(24, 20)),
                                          make_arg(shape(type::float32, {1, 2, 2, 4}), random_values(16, 21)),
                                          make_arg(shape(type::float32, {1, 2, 2, 4}), random_values(16, 22))}),
                 error);
}
