// RotaryEmbedding, LinearAttention, FlexAttention, SoftmaxCrossEntropyLoss, the
// smaller normalizations and dynamic reduce shapes, against direct computations.
#include "ops/attention.hpp"
#include "ops/loss.hpp"
#include "ops/normalization.hpp"
#include "ops/reduce.hpp"
#include "test_ops.hpp"

#include <kiln/program.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

std::vector<float> rnd(std::size_t n, unsigned seed, float lo = -1.5f, float hi = 1.5f) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen) == 0.0f ? 0.25f : d(gen);
    return v;
}

argument arg(std::vector<std::size_t> lens, const std::vector<float>& v) {
    return literal(shape(type::float32, std::move(lens)), v).get_argument();
}

std::vector<argument> run(const operation& op, const std::vector<argument>& in, program* prog = nullptr,
                          std::vector<module_ref> mods = {}) {
    program local;
    program& p = prog ? *prog : local;
    auto* m = p.get_main_module();
    std::vector<instruction_ref> params;
    param_map pm;
    for (std::size_t i = 0; i < in.size(); ++i) {
        const std::string n = "in" + std::to_string(i);
        params.push_back(m->add_parameter(n, in[i].get_shape()));
        pm[n] = in[i];
    }
    m->add_return({m->add_instruction(op, params, std::move(mods))});
    p.compile(*get_target("ref"));
    auto out = p.eval(pm);
    return out[0].get_shape().is_tuple() ? out[0].elements() : out;
}

void near_all(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-5) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
}

}  // namespace

TEST(ops_norm_attention, rotary_embedding_halves_and_interleaved) {
    const std::size_t B = 2, H = 3, S = 3, D = 6, R = 4, P = 7;  // rotate the first 4 of 6
    auto x = rnd(B * H * S * D, 1);
    auto cs = rnd(P * R / 2, 2);
    auto sn = rnd(P * R / 2, 3);
    std::vector<std::int64_t> pos{0, 3, 6, 1, 1, 5};
    for (bool inter : {false, true}) {
        op::rotary_embedding r;
        r.interleaved = inter;
        r.rotary_embedding_dim = R;
        auto y = run(r, {arg({B, H, S, D}, x), arg({P, R / 2}, cs), arg({P, R / 2}, sn),
                         literal(shape(type::int64, {B, S}), pos).get_argument()});
        std::vector<double> want(x.begin(), x.end());
        for (std::size_t b = 0; b < B; ++b)
            for (std::size_t h = 0; h < H; ++h)
                for (std::size_t s = 0; s < S; ++s) {
                    const std::size_t base = ((b * H + h) * S + s) * D;
                    const auto p = static_cast<std::size_t>(pos[b * S + s]);
                    for (std::size_t k = 0; k < R / 2; ++k) {
                        const std::size_t a = inter ? base + 2 * k : base + k;
                        const std::size_t c = inter ? base + 2 * k + 1 : base + k + R / 2;
                        const double co = cs[p * R / 2 + k], si = sn[p * R / 2 + k];
                        want[a] = co * x[a] - si * x[c];
                        want[c] = si * x[a] + co * x[c];
                    }
                }
        near_all(y[0].to_vector<float>(), want);
    }
}

TEST(ops_norm_attention, linear_attention_gated_delta_gqa) {
    const std::size_t B = 1, T = 3, Hq = 2, Hkv = 1, dk = 3, dv = 2;
    auto q = rnd(B * T * Hq * dk, 4), k = rnd(B * T * Hkv * dk, 5), v = rnd(B * T * Hkv * dv, 6);
    auto g = rnd(B * T * Hkv, 7, -0.5f, -0.1f), beta = rnd(B * T * Hkv, 8, 0.1f, 0.9f);
    op::linear_attention la;
    la.q_num_heads = Hq;
    la.kv_num_heads = Hkv;
    auto r = run(la, {arg({B, T, Hq * dk}, q), arg({B, T, Hkv * dk}, k), arg({B, T, Hkv * dv}, v), arg({B, T, Hkv}, g),
                      arg({B, T, Hkv}, beta)});
    ASSERT_EQ(r.size(), 2u);
    std::vector<double> S(dk * dv, 0.0), y(T * Hq * dv);
    for (std::size_t t = 0; t < T; ++t) {
        for (auto& s : S) s *= std::exp(double(g[t]));
        for (std::size_t m = 0; m < dv; ++m) {
            double ret = 0;
            for (std::size_t i = 0; i < dk; ++i) ret += S[i * dv + m] * k[t * dk + i];
            const double u = beta[t] * (v[t * dv + m] - ret);
            for (std::size_t i = 0; i < dk; ++i) S[i * dv + m] += k[t * dk + i] * u;
        }
        for (std::size_t h = 0; h < Hq; ++h)
            for (std::size_t m = 0; m < dv; ++m) {
                double acc = 0;
                for (std::size_t i = 0; i < dk; ++i) acc += q[(t * Hq + h) * dk + i] * S[i * dv + m];
                y[(t * Hq + h) * dv + m] = acc / std::sqrt(double(dk));
            }
    }
    near_all(r[0].to_vector<float>(), y);
    near_all(r[1].to_vector<float>(), S);
    la.update_rule = "linear";  // forbids decay and beta
    EXPECT_THROW(run(la, {arg({B, T, Hq * dk}, q), arg({B, T, Hkv * dk}, k), arg({B, T, Hkv * dv}, v), arg({B, T, Hkv}, g),
                          arg({B, T, Hkv}, beta)}),
                 error);
}

TEST(ops_norm_attention, flex_attention_modifier_bodies) {
    const std::size_t B = 1, H = 2, L = 3, S = 4, D = 5;
    auto q = rnd(B * H * L * D, 9), k = rnd(B * H * S * D, 10), v = rnd(B * H * S * D, 11);
    std::vector<argument> in{arg({B, H, L, D}, q), arg({B, H, S, D}, k), arg({B, H, S, D}, v)};
    op::flex_attention plain;
    plain.scale = 2.0f / std::sqrt(float(D));
    auto want = run(plain, in)[0].to_vector<float>();
    // score_mod doubling the scores == doubling the scale; prob_mod halving the probabilities halves Y.
    program p;
    const shape scores(type::float32, {B, H, L, S});
    auto* sm = p.create_module("score_mod");
    sm->add_return({sm->add_instruction(test::test_scale{2.0f}, {sm->add_parameter("scores", scores)})});
    auto* pm = p.create_module("prob_mod");
    pm->add_return({pm->add_instruction(test::test_scale{0.5f}, {pm->add_parameter("probs", scores)})});
    op::flex_attention mod;
    mod.score_params = {"scores"};
    mod.prob_params = {"probs"};
    auto got = run(mod, in, &p, {sm, pm})[0].to_vector<float>();
    std::vector<double> half(want.begin(), want.end());
    for (auto& h : half) h *= 0.5;
    near_all(got, half);
}

TEST(ops_norm_attention, softmax_cross_entropy_none_and_log_prob) {
    const std::size_t N = 3, C = 5;
    auto x = rnd(N * C, 12);
    std::vector<std::int64_t> t{4, 0, 2};
    op::softmax_cross_entropy_loss sce;
    sce.reduction = "none";
    auto r = run(sce, {arg({N, C}, x), literal(shape(type::int64, {N}), t).get_argument()});
    ASSERT_EQ(r.size(), 2u);
    std::vector<double> loss(N), logp(N * C);
    for (std::size_t n = 0; n < N; ++n) {
        double tot = 0;
        for (std::size_t c = 0; c < C; ++c) tot += std::exp(double(x[n * C + c]));
        for (std::size_t c = 0; c < C; ++c) logp[n * C + c] = x[n * C + c] - std::log(tot);
        loss[n] = -logp[n * C + static_cast<std::size_t>(t[n])];
    }
    near_all(r[0].to_vector<float>(), loss);
    near_all(r[1].to_vector<float>(), logp);
}

TEST(ops_norm_attention, lp_mvn_lrn) {
    const std::size_t N = 1, C = 3, W = 4;
    auto x = rnd(N * C * W, 13);
    auto l1 = run(op::lp_norm{2, 1}, {arg({N, C, W}, x)})[0].to_vector<float>();
    std::vector<double> want(x.size());
    for (std::size_t c = 0; c < C; ++c) {
        double s = 0;
        for (std::size_t w = 0; w < W; ++w) s += std::abs(x[c * W + w]);
        for (std::size_t w = 0; w < W; ++w) want[c * W + w] = x[c * W + w] / s;
    }
    near_all(l1, want);
    op::mean_variance_norm mvn;
    mvn.axes = {2};
    auto mv = run(mvn, {arg({N, C, W}, x)})[0].to_vector<float>();
    for (std::size_t c = 0; c < C; ++c) {
        double m = 0, v = 0;
        for (std::size_t w = 0; w < W; ++w) m += x[c * W + w] / double(W);
        for (std::size_t w = 0; w < W; ++w) v += std::pow(x[c * W + w] - m, 2) / double(W);
        for (std::size_t w = 0; w < W; ++w) want[c * W + w] = (x[c * W + w] - m) / (std::sqrt(v) + 1e-9);
    }
    near_all(mv, want, 1e-4);
    op::lrn l{0.2f, 0.75f, 1.5f, 2};  // window c-0 .. c+1
    auto lr = run(l, {arg({N, C, W}, x)})[0].to_vector<float>();
    for (std::size_t c = 0; c < C; ++c)
        for (std::size_t w = 0; w < W; ++w) {
            double sq = 0;
            for (std::size_t k = c; k <= std::min(C - 1, c + 1); ++k) sq += double(x[k * W + w]) * x[k * W + w];
            want[c * W + w] = x[c * W + w] / std::pow(1.5 + 0.2 / 2 * sq, 0.75);
        }
    near_all(lr, want);
}

TEST(ops_norm_attention, reduce_dynamic_shapes) {
    op::reduce_mean m;
    m.axes = {1};
    m.keepdims = false;
    operation o = m;
    auto d = shape::make_dynamic(type::float32, {dynamic_dimension{1, 8, {}}, dynamic_dimension{5, 5, {}}});
    auto s = o.compute_shape({d});
    ASSERT_TRUE(s.dynamic());
    ASSERT_EQ(s.ndim(), 1u);
    EXPECT_EQ(s.dyn_dims()[0].max, 8u);
    // Run-time axes: the rank follows from the axes count, the sizes from the values.
    op::reduce_sum r;
    r.keepdims = false;
    auto rs = operation(r).compute_shape({shape(type::float32, {2, 3, 4}), shape(type::int64, {2})});
    EXPECT_EQ(rs.ndim(), 1u);
    EXPECT_THROW(operation(r).compute_shape({shape(type::float32, {2, 3}), shape(type::float32, {1})}), error);
    m.axes = {2};
    EXPECT_THROW(operation(m).compute_shape({shape(type::float32, {2, 3})}), error);
}
