// RNN, GRU and LSTM against a direct step-by-step evaluation of the ONNX equations.
#include "ops/control_rnn.hpp"

#include <kiln/context.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(-0.9f, 0.9f);
    std::vector<float> v(n);
    for (auto& x : v) {
        x = d(gen);
        if (std::fabs(x) < 0.05f) x = 0.3f;
    }
    return v;
}
argument floats(const std::vector<std::size_t>& lens, const std::vector<float>& v) {
    return literal(shape(type::float32, lens), v).get_argument();
}
argument run(const operation& op, const std::vector<argument>& args) {
    std::vector<shape> shapes;
    for (auto& a : args) shapes.push_back(a.get_shape());
    host_context ctx;
    return op.compute(ctx, op.compute_shape(shapes), args);
}
double sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// W_g x + R_g h + Wb_g + Rb_g for gate g of direction d (rows g*H .. g*H+H).
struct weights {
    std::vector<float> W, R, B;
    std::size_t H, I, G;
    double gate(std::size_t d, std::size_t g, std::size_t j, const std::vector<double>& x, const std::vector<double>& h,
                bool with_rb = true) const {
        std::size_t row = g * H + j;
        double s = B[d * 2 * G * H + row] + (with_rb ? B[d * 2 * G * H + G * H + row] : 0.0);
        for (std::size_t k = 0; k < I; ++k) s += W[(d * G * H + row) * I + k] * x[k];
        for (std::size_t k = 0; k < H; ++k) s += R[(d * G * H + row) * H + k] * h[k];
        return s;
    }
    double rh(std::size_t d, std::size_t g, std::size_t j, const std::vector<double>& h) const {
        double s = B[d * 2 * G * H + G * H + g * H + j];
        for (std::size_t k = 0; k < H; ++k) s += R[(d * G * H + g * H + j) * H + k] * h[k];
        return s;
    }
};

void expect_close(const std::vector<float>& a, const std::vector<double>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
}

}  // namespace

TEST(ops_control_rnn, rnn_forward_with_bias_and_initial_state) {
    const std::size_t T = 3, N = 2, I = 3, H = 4;
    weights w{random_floats(H * I, 1), random_floats(H * H, 2), random_floats(2 * H, 3), H, I, 1};
    auto X = random_floats(T * N * I, 4), h0 = random_floats(N * H, 5);
    op::rnn r;
    r.hidden_size = H;
    r.has_bias = true;
    r.has_initial_h = true;
    auto out = run(r, {floats({T, N, I}, X), floats({1, H, I}, w.W), floats({1, H, H}, w.R), floats({1, 2 * H}, w.B),
                       floats({1, N, H}, h0)});
    std::vector<double> Y(T * N * H), Yh(N * H);
    for (std::size_t b = 0; b < N; ++b) {
        std::vector<double> h(h0.begin() + b * H, h0.begin() + (b + 1) * H);
        for (std::size_t t = 0; t < T; ++t) {
            std::vector<double> x(X.begin() + (t * N + b) * I, X.begin() + (t * N + b + 1) * I), hn(H);
            for (std::size_t j = 0; j < H; ++j) hn[j] = std::tanh(w.gate(0, 0, j, x, h));
            h = hn;
            for (std::size_t j = 0; j < H; ++j) Y[(t * N + b) * H + j] = h[j];
        }
        for (std::size_t j = 0; j < H; ++j) Yh[b * H + j] = h[j];
    }
    expect_close(out.elements()[0].to_vector<float>(), Y);
    expect_close(out.elements()[1].to_vector<float>(), Yh);
}

TEST(ops_control_rnn, gru_linear_before_reset_both_ways_with_clip) {
    const std::size_t T = 4, N = 1, I = 2, H = 3;
    weights w{random_floats(3 * H * I, 6), random_floats(3 * H * H, 7), random_floats(6 * H, 8), H, I, 3};
    auto X = random_floats(T * N * I, 9);
    for (bool lbr : {false, true}) {
        op::gru g;
        g.hidden_size = H;
        g.has_bias = true;
        g.linear_before_reset = lbr;
        g.clip = 0.5f;
        auto out = run(g, {floats({T, N, I}, X), floats({1, 3 * H, I}, w.W), floats({1, 3 * H, H}, w.R),
                           floats({1, 6 * H}, w.B)});
        auto clip = [](double v) { return std::clamp(v, -0.5, 0.5); };
        std::vector<double> h(H, 0.0), Y;
        for (std::size_t t = 0; t < T; ++t) {
            std::vector<double> x(X.begin() + t * I, X.begin() + (t + 1) * I), z(H), r(H), hn(H);
            for (std::size_t j = 0; j < H; ++j) {
                z[j] = sigmoid(clip(w.gate(0, 0, j, x, h)));
                r[j] = sigmoid(clip(w.gate(0, 1, j, x, h)));
            }
            std::vector<double> rh(H);
            for (std::size_t k = 0; k < H; ++k) rh[k] = r[k] * h[k];
            for (std::size_t j = 0; j < H; ++j) {
                double xpart = w.gate(0, 2, j, x, std::vector<double>(H, 0.0), false);
                double hpart = lbr ? r[j] * w.rh(0, 2, j, h) : w.rh(0, 2, j, rh);
                hn[j] = std::tanh(clip(xpart + hpart));
            }
            for (std::size_t j = 0; j < H; ++j) h[j] = (1 - z[j]) * hn[j] + z[j] * h[j];
            Y.insert(Y.end(), h.begin(), h.end());
        }
        expect_close(out.elements()[0].to_vector<float>(), Y);
        expect_close(out.elements()[1].to_vector<float>(), h);
    }
}

TEST(ops_control_rnn, lstm_bidirectional_peepholes_lengths_batch_first) {
    const std::size_t T = 3, N = 2, I = 2, H = 2, D = 2;
    weights w{random_floats(D * 4 * H * I, 10), random_floats(D * 4 * H * H, 11), random_floats(D * 8 * H, 12), H, I, 4};
    auto X = random_floats(N * T * I, 13), P = random_floats(D * 3 * H, 14);
    auto h0 = random_floats(N * D * H, 15), c0 = random_floats(N * D * H, 16);
    std::vector<int> lens{3, 2};
    op::lstm l;
    l.hidden_size = H;
    l.direction = 2;
    l.layout = 1;
    l.has_bias = l.has_sequence_lens = l.has_initial_h = l.has_initial_c = l.has_peephole = true;
    auto out = run(l, {floats({N, T, I}, X), floats({D, 4 * H, I}, w.W), floats({D, 4 * H, H}, w.R),
                       floats({D, 8 * H}, w.B), literal(shape(type::int32, {N}), lens).get_argument(),
                       floats({N, D, H}, h0), floats({N, D, H}, c0), floats({D, 3 * H}, P)});
    std::vector<double> Y(N * T * D * H, 0.0), Yh(N * D * H), Yc(N * D * H);
    for (std::size_t d = 0; d < D; ++d)
        for (std::size_t b = 0; b < N; ++b) {
            std::vector<double> h(H), c(H);
            for (std::size_t j = 0; j < H; ++j) {
                h[j] = h0[(b * D + d) * H + j];
                c[j] = c0[(b * D + d) * H + j];
            }
            const std::size_t L = static_cast<std::size_t>(lens[b]);
            for (std::size_t s = 0; s < L; ++s) {
                std::size_t t = d == 0 ? s : L - 1 - s;
                std::vector<double> x(X.begin() + (b * T + t) * I, X.begin() + (b * T + t + 1) * I), hn(H), cn(H);
                for (std::size_t j = 0; j < H; ++j) {
                    double i = sigmoid(w.gate(d, 0, j, x, h) + P[d * 3 * H + j] * c[j]);
                    double f = sigmoid(w.gate(d, 2, j, x, h) + P[d * 3 * H + 2 * H + j] * c[j]);
                    double g = std::tanh(w.gate(d, 3, j, x, h));
                    cn[j] = f * c[j] + i * g;
                    double o = sigmoid(w.gate(d, 1, j, x, h) + P[d * 3 * H + H + j] * cn[j]);
                    hn[j] = o * std::tanh(cn[j]);
                }
                h = hn;
                c = cn;
                for (std::size_t j = 0; j < H; ++j) Y[((b * T + t) * D + d) * H + j] = h[j];
            }
            for (std::size_t j = 0; j < H; ++j) {
                Yh[(b * D + d) * H + j] = h[j];
                Yc[(b * D + d) * H + j] = c[j];
            }
        }
    expect_close(out.elements()[0].to_vector<float>(), Y);
    expect_close(out.elements()[1].to_vector<float>(), Yh);
    expect_close(out.elements()[2].to_vector<float>(), Yc);
}

TEST(ops_control_rnn, shape_errors_name_the_input) {
    op::lstm l;
    l.hidden_size = 3;
    try {
        l.compute_shape({shape(type::float32, {2, 1, 4}), shape(type::float32, {1, 12, 5}), shape(type::float32, {1, 12, 3})});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(std::string(e.what()).find("W"), std::string::npos) << e.what();
    }
    op::rnn r;
    r.hidden_size = 2;
    r.activations = {"NoSuch"};
    EXPECT_THROW(r.compute_shape({shape(type::float32, {2, 1, 4}), shape(type::float32, {1, 2, 4}),
                                  shape(type::float32, {1, 2, 2})}),
                 error);
}
