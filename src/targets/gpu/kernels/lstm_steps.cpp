#include "targets/gpu/kernels/lstm_steps.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <cmath>

namespace kiln::gpu {

shape lstm_steps::compute_shape(const std::vector<shape>& in) const {
    const std::size_t want = 2 + has_bias + has_initial_h + has_initial_c;
    auto fail = [](const std::string& why) -> shape { throw_error(error_code::shape, "gpu::lstm_steps: " + why); };
    if (in.size() != want) return fail("expected " + std::to_string(want) + " inputs");
    for (const auto& s : in)
        if (!s.is_tensor() || s.dynamic() || s.get_type() != type::float32) return fail("static float32 inputs only");
    const auto& xw = in[0];
    const auto& rt = in[1];
    const std::size_t D = directions();
    if (xw.ndim() != 3 || rt.ndim() != 3 || xw.lens()[0] != D || rt.lens()[0] != D || batch == 0)
        return fail("xw [D, T*B, 4H] and rt [D, H, 4H]");
    const std::size_t H = rt.lens()[1];
    if (H == 0 || rt.lens()[2] != 4 * H || xw.lens()[2] != 4 * H || xw.lens()[1] % batch != 0)
        return fail("xw " + xw.to_string() + " and rt " + rt.to_string() + " do not match");
    const std::size_t T = xw.lens()[1] / batch;
    if (has_bias && in[2].lens() != std::vector<std::size_t>{D, 8 * H}) return fail("bias must be [D, 8H]");
    for (int i : {h0_input(), c0_input()})
        if (i >= 0 && in[static_cast<std::size_t>(i)].lens() != std::vector<std::size_t>{D, batch, H})
            return fail("initial states must be [D, B, H]");
    return shape(type::float32, {T + 2, D, batch, H});
}

argument lstm_steps::compute(const shape& output, const std::vector<argument>& args) const {
    const std::size_t D = directions(), B = batch, H = args[1].get_shape().lens()[1];
    const std::size_t T = output.lens()[0] - 2, G = 4 * H;
    // to_vector reads each tensor in row-major order at its own strides.
    const auto xw = args[0].to_vector<double>();
    const auto rt = args[1].to_vector<double>();
    std::vector<double> bias(D * 8 * H, 0.0), h(D * B * H, 0.0), c(D * B * H, 0.0);
    if (has_bias) bias = args[static_cast<std::size_t>(bias_input())].to_vector<double>();
    if (has_initial_h) h = args[static_cast<std::size_t>(h0_input())].to_vector<double>();
    if (has_initial_c) c = args[static_cast<std::size_t>(c0_input())].to_vector<double>();
    std::vector<float> out(output.elements(), 0.0f);
    auto at = [&](std::size_t row, std::size_t d, std::size_t b, std::size_t j) { return ((row * D + d) * B + b) * H + j; };
    auto sigmoid = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    std::vector<double> gates(G);
    for (std::size_t d = 0; d < D; ++d)
        for (std::size_t b = 0; b < B; ++b) {
            double* hs = &h[(d * B + b) * H];
            double* cs = &c[(d * B + b) * H];
            for (std::size_t s = 0; s < T; ++s) {
                const std::size_t t = reversed(d) ? T - 1 - s : s;
                for (std::size_t g = 0; g < G; ++g) {
                    double a = xw[(d * T * B + t * B + b) * G + g] + bias[d * 8 * H + g] + bias[d * 8 * H + G + g];
                    for (std::size_t k = 0; k < H; ++k) a += hs[k] * rt[(d * H + k) * G + g];
                    gates[g] = a;
                }
                for (std::size_t j = 0; j < H; ++j) {
                    const double i = sigmoid(gates[j]), o = sigmoid(gates[H + j]), f = sigmoid(gates[2 * H + j]);
                    cs[j] = f * cs[j] + i * std::tanh(gates[3 * H + j]);
                    hs[j] = o * std::tanh(cs[j]);
                    out[at(t, d, b, j)] = static_cast<float>(hs[j]);
                }
            }
            for (std::size_t j = 0; j < H; ++j) {
                out[at(T, d, b, j)] = static_cast<float>(hs[j]);
                out[at(T + 1, d, b, j)] = static_cast<float>(cs[j]);
            }
        }
    argument r(output);
    std::copy(out.begin(), out.end(), reinterpret_cast<float*>(r.data()));
    return r;
}

KILN_REGISTER_OP(lstm_steps)

}  // namespace kiln::gpu
