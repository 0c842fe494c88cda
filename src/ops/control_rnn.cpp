#include "ops/control_rnn.hpp"

#include "ops/common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <functional>
#include <optional>

namespace kiln::op {

std::size_t num_gates(rnn_kind kind) { return kind == rnn_kind::rnn ? 1 : kind == rnn_kind::gru ? 3 : 4; }
std::size_t num_activations(rnn_kind kind) { return kind == rnn_kind::rnn ? 1 : kind == rnn_kind::gru ? 2 : 3; }

namespace {

std::string kind_name(rnn_kind k) { return k == rnn_kind::rnn ? "rnn" : k == rnn_kind::gru ? "gru" : "lstm"; }

// Positions of the inputs the flags say are present.
struct input_slots {
    int b = -1, lens = -1, h0 = -1, c0 = -1, p = -1;
    std::size_t count = 3;
};
input_slots slots_of(rnn_kind kind, const recurrent_attributes& a) {
    input_slots s;
    auto next = [&](bool present) { return present ? static_cast<int>(s.count++) : -1; };
    s.b = next(a.has_bias);
    s.lens = next(a.has_sequence_lens);
    s.h0 = next(a.has_initial_h);
    s.c0 = next(kind == rnn_kind::lstm && a.has_initial_c);
    s.p = next(kind == rnn_kind::lstm && a.has_peephole);
    return s;
}

void expect_lens(const std::string& op, const shape& s, const std::vector<std::size_t>& want, const std::string& what) {
    if (s.lens() != want) {
        std::string w = "[";
        for (std::size_t i = 0; i < want.size(); ++i) w += (i ? ", " : "") + std::to_string(want[i]);
        throw_error(error_code::shape, op + ": " + what + " is " + s.to_string() + ", expected " + w + "]");
    }
}

using activation = std::function<double(double)>;

activation make_activation(const std::string& op, const std::string& name, std::optional<float> alpha,
                           std::optional<float> beta) {
    std::string n = name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (n == "tanh") return [](double x) { return std::tanh(x); };
    if (n == "sigmoid") return [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    if (n == "relu") return [](double x) { return std::max(x, 0.0); };
    if (n == "affine") {
        double a = alpha.value_or(1.0f), b = beta.value_or(0.0f);
        return [a, b](double x) { return a * x + b; };
    }
    if (n == "leakyrelu") {
        double a = alpha.value_or(0.01f);
        return [a](double x) { return x >= 0 ? x : a * x; };
    }
    if (n == "thresholdedrelu") {
        double a = alpha.value_or(1.0f);
        return [a](double x) { return x > a ? x : 0.0; };
    }
    if (n == "scaledtanh") {
        double a = alpha.value_or(1.0f), b = beta.value_or(1.0f);
        return [a, b](double x) { return a * std::tanh(b * x); };
    }
    if (n == "hardsigmoid") {
        double a = alpha.value_or(0.2f), b = beta.value_or(0.5f);
        return [a, b](double x) { return std::clamp(a * x + b, 0.0, 1.0); };
    }
    if (n == "elu") {
        double a = alpha.value_or(1.0f);
        return [a](double x) { return x >= 0 ? x : a * (std::exp(x) - 1.0); };
    }
    if (n == "softsign") return [](double x) { return x / (1.0 + std::fabs(x)); };
    if (n == "softplus") return [](double x) { return std::log1p(std::exp(x)); };
    throw_error(error_code::unsupported, op + ": unknown activation '" + name + "'");
}

bool takes_alpha(const std::string& name) {
    std::string n = name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    return n == "affine" || n == "leakyrelu" || n == "thresholdedrelu" || n == "scaledtanh" || n == "hardsigmoid" ||
           n == "elu";
}
bool takes_beta(const std::string& name) {
    std::string n = name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    return n == "affine" || n == "scaledtanh" || n == "hardsigmoid";
}

// The activations of every direction, defaults filled in; alpha/beta are consumed
// in order by the activations that take them.
std::vector<activation> activations_of(rnn_kind kind, const recurrent_attributes& a) {
    const std::size_t per = num_activations(kind);
    const std::size_t total = per * a.num_directions();
    std::vector<std::string> names = a.activations;
    if (names.empty()) {
        std::vector<std::string> d = kind == rnn_kind::rnn   ? std::vector<std::string>{"Tanh"}
                                     : kind == rnn_kind::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                             : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
        for (std::size_t i = 0; i < a.num_directions(); ++i) names.insert(names.end(), d.begin(), d.end());
    } else if (names.size() == per && total > per) {
        names.insert(names.end(), a.activations.begin(), a.activations.end());  // one list for both directions
    }
    if (names.size() != total)
        throw_error(error_code::invalid_argument, kind_name(kind) + ": expected " + std::to_string(total) +
                                                      " activations, got " + std::to_string(names.size()));
    std::vector<activation> out;
    std::size_t ai = 0, bi = 0;
    for (auto& n : names) {
        std::optional<float> alpha, beta;
        if (takes_alpha(n) && ai < a.activation_alpha.size()) alpha = a.activation_alpha[ai++];
        if (takes_beta(n) && bi < a.activation_beta.size()) beta = a.activation_beta[bi++];
        out.push_back(make_activation(kind_name(kind), n, alpha, beta));
    }
    return out;
}

}  // namespace

shape recurrent_compute_shape(rnn_kind kind, const recurrent_attributes& a, const std::vector<shape>& in) {
    const auto op = kind_name(kind);
    auto sl = slots_of(kind, a);
    check_num_inputs(op, in, sl.count);
    for (std::size_t i = 0; i < in.size(); ++i) check_rank(op, in[i], 1, 3, "input " + std::to_string(i));
    check_rank(op, in[0], 3, 3, "X");
    const auto t = in[0].get_type();
    if (t != type::float32 && t != type::float64 && t != type::float16 && t != type::bfloat16)
        throw_error(error_code::type, op + ": X must be a float tensor, got " + std::string(type_name(t)));
    for (int i : {1, 2, sl.b, sl.h0, sl.c0, sl.p})
        if (i >= 0 && in[static_cast<std::size_t>(i)].get_type() != t)
            throw_error(error_code::type, op + ": input " + std::to_string(i) + " must have X's type " +
                                              std::string(type_name(t)));
    if (a.direction < 0 || a.direction > 2) throw_error(error_code::invalid_argument, op + ": bad direction");
    if (a.layout != 0 && a.layout != 1) throw_error(error_code::invalid_argument, op + ": layout must be 0 or 1");
    if (a.hidden_size == 0) throw_error(error_code::invalid_argument, op + ": hidden_size must be positive");
    const auto& xl = in[0].lens();
    const std::size_t seq = a.layout == 0 ? xl[0] : xl[1];
    const std::size_t batch = a.layout == 0 ? xl[1] : xl[0];
    const std::size_t input = xl[2];
    const std::size_t dirs = a.num_directions(), h = a.hidden_size, g = num_gates(kind);
    expect_lens(op, in[1], {dirs, g * h, input}, "W");
    expect_lens(op, in[2], {dirs, g * h, h}, "R");
    if (sl.b >= 0) expect_lens(op, in[sl.b], {dirs, 2 * g * h}, "B");
    if (sl.lens >= 0) {
        expect_lens(op, in[sl.lens], {batch}, "sequence_lens");
        if (!is_integer(in[sl.lens].get_type())) throw_error(error_code::type, op + ": sequence_lens must be integers");
    }
    std::vector<std::size_t> state = a.layout == 0 ? std::vector<std::size_t>{dirs, batch, h}
                                                   : std::vector<std::size_t>{batch, dirs, h};
    if (sl.h0 >= 0) expect_lens(op, in[sl.h0], state, "initial_h");
    if (sl.c0 >= 0) expect_lens(op, in[sl.c0], state, "initial_c");
    if (sl.p >= 0) expect_lens(op, in[sl.p], {dirs, 3 * h}, "P");
    activations_of(kind, a);  // validates names and counts
    shape y(t, a.layout == 0 ? std::vector<std::size_t>{seq, dirs, batch, h}
                             : std::vector<std::size_t>{batch, seq, dirs, h});
    std::vector<shape> outs{y, shape(t, state)};
    if (kind == rnn_kind::lstm) outs.emplace_back(t, state);
    return shape::tuple(outs);
}

argument recurrent_compute(rnn_kind kind, const recurrent_attributes& a, const std::vector<argument>& args) {
    auto out_shape = recurrent_compute_shape(kind, a, [&] {
        std::vector<shape> s;
        for (auto& x : args) s.push_back(x.get_shape());
        return s;
    }());
    auto sl = slots_of(kind, a);
    const auto& xl = args[0].get_shape().lens();
    const std::size_t seq = a.layout == 0 ? xl[0] : xl[1];
    const std::size_t batch = a.layout == 0 ? xl[1] : xl[0];
    const std::size_t in_size = xl[2];
    const std::size_t dirs = a.num_directions(), H = a.hidden_size, G = num_gates(kind);
    auto X = args[0].to_vector<double>();
    auto W = args[1].to_vector<double>();
    auto R = args[2].to_vector<double>();
    std::vector<double> B(dirs * 2 * G * H, 0.0), P(dirs * 3 * H, 0.0);
    if (sl.b >= 0) B = args[sl.b].to_vector<double>();
    if (sl.p >= 0) P = args[sl.p].to_vector<double>();
    std::vector<std::int64_t> lens(batch, static_cast<std::int64_t>(seq));
    if (sl.lens >= 0) lens = args[sl.lens].to_vector<std::int64_t>();
    for (auto l : lens)
        if (l < 0 || static_cast<std::size_t>(l) > seq)
            throw_error(error_code::invalid_argument, kind_name(kind) + ": sequence_lens value " + std::to_string(l) +
                                                          " is outside [0, " + std::to_string(seq) + "]");
    // State index (d, b, j) in the caller's layout.
    auto sidx = [&](std::size_t d, std::size_t b, std::size_t j) {
        return a.layout == 0 ? (d * batch + b) * H + j : (b * dirs + d) * H + j;
    };
    auto xidx = [&](std::size_t t, std::size_t b, std::size_t k) {
        return a.layout == 0 ? (t * batch + b) * in_size + k : (b * seq + t) * in_size + k;
    };
    auto yidx = [&](std::size_t t, std::size_t d, std::size_t b, std::size_t j) {
        return a.layout == 0 ? ((t * dirs + d) * batch + b) * H + j : ((b * seq + t) * dirs + d) * H + j;
    };
    std::vector<double> Hs(dirs * batch * H, 0.0), Cs(dirs * batch * H, 0.0);
    if (sl.h0 >= 0) Hs = args[sl.h0].to_vector<double>();
    if (sl.c0 >= 0) Cs = args[sl.c0].to_vector<double>();
    std::vector<double> Y(seq * dirs * batch * H, 0.0);
    auto acts = activations_of(kind, a);
    const std::size_t per = num_activations(kind);
    auto clip = [&](double v) { return a.clip > 0 ? std::clamp(v, -double(a.clip), double(a.clip)) : v; };

    std::vector<double> xw(G * H), hr(G * H), h(H), c(H), z(H), rg(H), cand(H);
    for (std::size_t d = 0; d < dirs; ++d) {
        const bool reverse = a.direction == 1 || (a.direction == 2 && d == 1);
        const double* w = W.data() + d * G * H * in_size;
        const double* r = R.data() + d * G * H * H;
        const double* wb = B.data() + d * 2 * G * H;
        const double* rb = wb + G * H;
        const double* p = P.data() + d * 3 * H;  // peepholes i, o, f
        const activation& f = acts[d * per];
        const activation& g = per > 1 ? acts[d * per + 1] : f;
        const activation& act_h = per > 2 ? acts[d * per + 2] : f;
        for (std::size_t b = 0; b < batch; ++b) {
            const auto len = static_cast<std::size_t>(lens[b]);
            for (std::size_t j = 0; j < H; ++j) {
                h[j] = Hs[sidx(d, b, j)];
                c[j] = Cs[sidx(d, b, j)];
            }
            for (std::size_t step = 0; step < len; ++step) {
                const std::size_t t = reverse ? len - 1 - step : step;
                // xw = X_t W^T + Wb and hr = H_{t-1} R^T + Rb, one row per gate unit.
                for (std::size_t q = 0; q < G * H; ++q) {
                    double s = wb[q];
                    for (std::size_t k = 0; k < in_size; ++k) s += X[xidx(t, b, k)] * w[q * in_size + k];
                    xw[q] = s;
                    double u = rb[q];
                    for (std::size_t k = 0; k < H; ++k) u += h[k] * r[q * H + k];
                    hr[q] = u;
                }
                if (kind == rnn_kind::rnn) {
                    for (std::size_t j = 0; j < H; ++j) h[j] = f(clip(xw[j] + hr[j]));
                } else if (kind == rnn_kind::gru) {
                    // Gate rows z, r, h.
                    for (std::size_t j = 0; j < H; ++j) {
                        z[j] = f(clip(xw[j] + hr[j]));
                        rg[j] = f(clip(xw[H + j] + hr[H + j]));
                    }
                    for (std::size_t j = 0; j < H; ++j) {
                        double u;
                        if (a.linear_before_reset) {
                            u = rg[j] * hr[2 * H + j];
                        } else {
                            // (r . H_{t-1}) R_h^T + Rb_h
                            u = rb[2 * H + j];
                            for (std::size_t k = 0; k < H; ++k) u += rg[k] * h[k] * r[(2 * H + j) * H + k];
                        }
                        cand[j] = g(clip(xw[2 * H + j] + u));
                    }
                    for (std::size_t j = 0; j < H; ++j) h[j] = (1.0 - z[j]) * cand[j] + z[j] * h[j];
                } else {
                    // Gate rows i, o, f, c.
                    for (std::size_t j = 0; j < H; ++j) {
                        double i_g = f(clip(xw[j] + hr[j] + p[j] * c[j]));
                        double f_g = a.input_forget ? 1.0 - i_g : f(clip(xw[2 * H + j] + hr[2 * H + j] + p[2 * H + j] * c[j]));
                        double c_g = g(clip(xw[3 * H + j] + hr[3 * H + j]));
                        c[j] = f_g * c[j] + i_g * c_g;
                        double o_g = f(clip(xw[H + j] + hr[H + j] + p[H + j] * c[j]));
                        h[j] = o_g * act_h(c[j]);
                    }
                }
                for (std::size_t j = 0; j < H; ++j) Y[yidx(t, d, b, j)] = h[j];
            }
            for (std::size_t j = 0; j < H; ++j) {
                Hs[sidx(d, b, j)] = h[j];
                Cs[sidx(d, b, j)] = c[j];
            }
        }
    }
    const auto& outs = out_shape.sub_shapes();
    std::vector<argument> results{literal(outs[0], Y).get_argument(), literal(outs[1], Hs).get_argument()};
    if (kind == rnn_kind::lstm) results.push_back(literal(outs[2], Cs).get_argument());
    return argument::make_tuple(std::move(results));
}

KILN_REGISTER_OP(rnn)
KILN_REGISTER_OP(gru)
KILN_REGISTER_OP(lstm)

}  // namespace kiln::op
