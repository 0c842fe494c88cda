#include "targets/gpu/codegen/emit_lstm.hpp"

#include "codegen/hash.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/kernels/lstm_steps.hpp"

#include <kiln/errors.hpp>

#include <algorithm>
#include <sstream>

namespace kiln::gpu::codegen {

namespace {

const lstm_steps& steps_of(const op::fused& body) { return *body.nodes.at(0).op.any_cast<lstm_steps>(); }

// Sizes and strides (elements, int: lstm_problem checks the spans).
struct lstm_geometry {
    std::size_t D = 1, T = 1, B = 1, H = 1, units = 1;
    std::vector<std::size_t> xw, rt, bias, h0, c0;
};

lstm_geometry geometry_of(const op::fused& body, const std::vector<shape>& in) {
    auto fail = [](const std::string& why) -> lstm_geometry { throw_error(error_code::unsupported, "gpu lstm: " + why); };
    if (!is_lstm(body)) return fail("not an lstm_steps body");
    const auto& s = steps_of(body);
    const auto out = body.compute_shape(in);  // checks the inputs
    lstm_geometry g;
    g.T = out.lens()[0] - 2;
    g.D = out.lens()[1];
    g.B = out.lens()[2];
    g.H = out.lens()[3];
    if (g.T == 0) return fail("no time steps");
    if (g.H > lstm_max_hidden) return fail("hidden size over " + std::to_string(lstm_max_hidden));
    g.units = (g.H + block_size - 1) / block_size;
    constexpr std::size_t limit = 1u << 30;
    if (out.elements() >= limit) return fail("offsets past an int");
    for (const auto& x : in) {
        std::size_t span = 1;
        for (std::size_t i = 0; i < x.ndim(); ++i) span += (x.lens()[i] - 1) * x.strides()[i];
        if (span >= limit) return fail("offsets past an int");
    }
    g.xw = in[0].strides();
    g.rt = in[1].strides();
    if (s.has_bias) g.bias = in[static_cast<std::size_t>(s.bias_input())].strides();
    if (s.has_initial_h) g.h0 = in[static_cast<std::size_t>(s.h0_input())].strides();
    if (s.has_initial_c) g.c0 = in[static_cast<std::size_t>(s.c0_input())].strides();
    return g;
}

std::string n(std::size_t x) { return std::to_string(x); }

}  // namespace

bool is_lstm(const op::fused& body) {
    if (body.nodes.size() != 1) return false;
    const auto* s = body.nodes[0].op.any_cast<lstm_steps>();
    if (!s) return false;
    const std::size_t inputs = 2 + s->has_bias + s->has_initial_h + s->has_initial_c;
    for (std::size_t i = 0; i < inputs; ++i)
        if (body.nodes[0].args.size() != inputs || body.nodes[0].args[i] != op::fused_input_arg(i)) return false;
    return true;
}

std::string lstm_problem(const op::fused& body, const std::vector<shape>& inputs) {
    try {
        (void)geometry_of(body, inputs);
    } catch (const error& e) {
        if (e.code() != error_code::unsupported && e.code() != error_code::shape) throw;
        return e.what();
    }
    return "";
}

std::string emit_lstm_kernel(const op::fused& body, const std::vector<shape>& inputs, const std::string& name) {
    const auto& s = steps_of(body);
    const auto g = geometry_of(body, inputs);
    const std::size_t D = g.D, T = g.T, B = g.B, H = g.H, U = g.units;
    std::ostringstream o;
    o << "extern \"C\" __global__ void __launch_bounds__(" << block_size << ") " << name << "(const kiln_args a_) {\n";
    o << "  const float* __restrict__ xw = (const float*)a_.in[0];\n";
    o << "  const float* __restrict__ rt = (const float*)a_.in[1];\n";
    if (s.has_bias) o << "  const float* __restrict__ bias = (const float*)a_.in[" << s.bias_input() << "];\n";
    if (s.has_initial_h) o << "  const float* __restrict__ h0 = (const float*)a_.in[" << s.h0_input() << "];\n";
    if (s.has_initial_c) o << "  const float* __restrict__ c0 = (const float*)a_.in[" << s.c0_input() << "];\n";
    o << "  float* __restrict__ out = (float*)a_.out;\n";
    o << "  __shared__ float h_[" << H << "];\n";
    // The columns of thread x's units (clamped, so a thread past H reads real memory in the
    // product and its results are dropped: no divergence in the inner loop).
    for (std::size_t u = 0; u < U; ++u) {
        const std::string x = "(int)threadIdx.x + " + n(u * block_size);
        o << "  const bool on" << u << "_ = " << x << " < " << H << ";\n";
        o << "  const int j" << u << "_ = on" << u << "_ ? " << x << " : " << H - 1 << ";\n";
    }
    o << "  for (int w_ = blockIdx.x; w_ < " << D * B << "; w_ += gridDim.x) {\n";
    o << "    const int d_ = w_ / " << B << ", b_ = w_ % " << B << ";\n";
    o << "    __syncthreads();  // the previous row's readers of h_ are done\n";
    const char* gate[4] = {"i", "o", "f", "c"};
    for (std::size_t u = 0; u < U; ++u) {
        const std::string j = "j" + n(u) + "_";
        o << "    float c" << u << "_ = " << (s.has_initial_c ? "c0[d_ * " + n(g.c0[0]) + " + b_ * " + n(g.c0[1]) + " + " + j + " * " + n(g.c0[2]) + "]" : "0.0f") << ";\n";
        o << "    float h" << u << "_ = " << (s.has_initial_h ? "h0[d_ * " + n(g.h0[0]) + " + b_ * " + n(g.h0[1]) + " + " + j + " * " + n(g.h0[2]) + "]" : "0.0f") << ";\n";
        o << "    if (on" << u << "_) h_[" << j << "] = h" << u << "_;\n";
        for (std::size_t q = 0; q < 4; ++q) {
            o << "    const float b" << gate[q] << u << "_ = ";
            if (s.has_bias) {
                const std::string col = n(q * H) + " + " + j;
                o << "bias[d_ * " << g.bias[0] << " + (" << col << ") * " << g.bias[1] << "] + bias[d_ * " << g.bias[0]
                  << " + (" << 4 * H << " + " << col << ") * " << g.bias[1] << "]";
            } else {
                o << "0.0f";
            }
            o << ";\n";
        }
    }
    o << "    __syncthreads();\n";
    o << "    for (int s_ = 0; s_ < " << T << "; ++s_) {\n";
    const std::string rev = "(" + n(T - 1) + " - s_)";
    o << "      const int t_ = " << (s.direction == 0 ? "s_" : s.direction == 1 ? rev : "d_ ? " + rev + " : s_") << ";\n";
    o << "      const float* xr_ = xw + d_ * " << g.xw[0] << " + (t_ * " << B << " + b_) * " << g.xw[1] << ";\n";
    o << "      const float* rd_ = rt + d_ * " << g.rt[0] << ";\n";
    for (std::size_t u = 0; u < U; ++u)
        for (std::size_t q = 0; q < 4; ++q)
            o << "      float a" << gate[q] << u << "_ = xr_[(" << q * H << " + j" << u << "_) * " << g.xw[2] << "] + b"
              << gate[q] << u << "_;\n";
    o << "#pragma unroll 4\n";
    o << "      for (int k_ = 0; k_ < " << H << "; ++k_) {\n";
    o << "        const float hk_ = h_[k_];\n";
    o << "        const float* rk_ = rd_ + k_ * " << g.rt[1] << ";\n";
    for (std::size_t u = 0; u < U; ++u)
        for (std::size_t q = 0; q < 4; ++q)
            o << "        a" << gate[q] << u << "_ += hk_ * rk_[(" << q * H << " + j" << u << "_) * " << g.rt[2] << "];\n";
    o << "      }\n";
    o << "      __syncthreads();  // every thread has read h_\n";
    o << "      float* y_ = out + ((t_ * " << D << " + d_) * " << B << " + b_) * " << H << ";\n";
    for (std::size_t u = 0; u < U; ++u) {
        o << "      if (on" << u << "_) {\n";
        o << "        const float i_ = 1.0f / (1.0f + kiln_expf(-ai" << u << "_));\n";
        o << "        const float o_ = 1.0f / (1.0f + kiln_expf(-ao" << u << "_));\n";
        o << "        const float f_ = 1.0f / (1.0f + kiln_expf(-af" << u << "_));\n";
        o << "        c" << u << "_ = f_ * c" << u << "_ + i_ * kiln_tanhf(ac" << u << "_);\n";
        o << "        h" << u << "_ = o_ * kiln_tanhf(c" << u << "_);\n";
        o << "        h_[j" << u << "_] = h" << u << "_;\n";
        o << "        y_[j" << u << "_] = h" << u << "_;\n";
        o << "      }\n";
    }
    o << "      __syncthreads();  // h_ holds this step's h\n";
    o << "    }\n";
    o << "    float* yh_ = out + ((" << T << " * " << D << " + d_) * " << B << " + b_) * " << H << ";\n";
    o << "    float* yc_ = out + ((" << T + 1 << " * " << D << " + d_) * " << B << " + b_) * " << H << ";\n";
    for (std::size_t u = 0; u < U; ++u)
        o << "    if (on" << u << "_) { yh_[j" << u << "_] = h" << u << "_; yc_[j" << u << "_] = c" << u << "_; }\n";
    o << "  }\n}\n";
    return o.str();
}

std::string lstm_symbol(const op::fused& body, const std::vector<shape>& inputs) {
    return "kiln_gpu_lstm_" + kiln::codegen::content_hash(emit_lstm_kernel(body, inputs, "KERNEL")).substr(0, 24);
}

unsigned lstm_grid(const op::fused& body, const std::vector<shape>& inputs) {
    const auto g = geometry_of(body, inputs);
    return static_cast<unsigned>(std::clamp<std::size_t>(g.D * g.B, 1, 65535u * 8));
}

}  // namespace kiln::gpu::codegen
