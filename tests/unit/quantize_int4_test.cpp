// Weight-only int4: the matmul_int4 op against products computed here from the int4 values
// (unpacked by this file's own code), quantize_int4_weights (what it rewrites, its error
// against float32, odd K), the cpu kernels (every variant this CPU runs) against a plain
// dequantize + matmul in double, .kiln round trips, and ONNX's blocked int4
// DequantizeLinear -> MatMul fused into the same op.
#include "ops/nn_matmul_int4.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/int4_gemm/int4_gemm.hpp"
#include "targets/cpu/kernels/int4_gemm/int4_gemm_args.hpp"

#include <kiln/module_text.hpp>
#include <kiln/program.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

using namespace kiln;

namespace {

std::vector<float> random_values(std::mt19937& rng, std::size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

std::vector<int> random_int4(std::mt19937& rng, std::size_t n) {
    std::uniform_int_distribution<int> d(-8, 7);
    std::vector<int> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// Two's complement nibbles, the even element low (written here, not with op::pack_int4).
std::vector<std::uint8_t> nibbles(const std::vector<int>& v) {
    std::vector<std::uint8_t> out((v.size() + 1) / 2, 0);
    for (std::size_t i = 0; i < v.size(); ++i) out[i / 2] |= static_cast<std::uint8_t>((v[i] & 15) << (4 * (i % 2)));
    return out;
}

// y[m][n] = sum_k a[m][k] (q[k][n] - z[k/bs][n]) s[k/bs][n], in double.
std::vector<double> reference(const std::vector<float>& a, const std::vector<int>& q, const std::vector<float>& s,
                              const std::vector<int>& z, std::size_t m, std::size_t k, std::size_t n, std::size_t bs) {
    std::vector<double> y(m * n, 0.0);
    for (std::size_t i = 0; i < m; ++i)
        for (std::size_t c = 0; c < n; ++c)
            for (std::size_t r = 0; r < k; ++r) {
                const std::size_t si = (r / bs) * n + c;
                const float w = (static_cast<float>(q[r * n + c]) - (z.empty() ? 0.0f : static_cast<float>(z[si]))) * s[si];
                y[i * n + c] += double(a[i * k + r]) * double(w);
            }
    return y;
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        num += (got[i] - want[i]) * (got[i] - want[i]);
        den += want[i] * want[i];
    }
    return std::sqrt(num / den);
}

double max_rel_diff(const std::vector<float>& got, const std::vector<double>& want) {
    double scale = 0, diff = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        scale = std::max(scale, std::fabs(want[i]));
        diff = std::max(diff, std::fabs(got[i] - want[i]));
    }
    return diff / scale;
}

struct case_data {
    std::size_t m, k, n, bs;
    bool zero_points;
};

}  // namespace

TEST(matmul_int4, ref_op_equals_the_dequantized_product) {
    std::mt19937 rng(1);
    for (const case_data c : {case_data{3, 45, 7, 32, false}, case_data{2, 64, 16, 16, true}, case_data{1, 33, 5, 8, true}}) {
        const std::size_t nb = (c.k + c.bs - 1) / c.bs;
        const auto a = random_values(rng, c.m * c.k);
        const auto q = random_int4(rng, c.k * c.n);
        auto s = random_values(rng, nb * c.n, 0.1f);
        const auto z = c.zero_points ? random_int4(rng, nb * c.n) : std::vector<int>{};
        op::matmul_int4 op;
        op.block_size = static_cast<std::int64_t>(c.bs);
        std::vector<argument> args{literal(shape(type::float32, {c.m, c.k}), a).get_argument(),
                                   literal(shape(type::uint8, {(c.k * c.n + 1) / 2}), nibbles(q)).get_argument(),
                                   literal(shape(type::float32, {nb, c.n}), s).get_argument()};
        if (c.zero_points) args.push_back(literal(shape(type::uint8, {(nb * c.n + 1) / 2}), nibbles(z)).get_argument());
        std::vector<shape> shapes;
        for (auto& x : args) shapes.push_back(x.get_shape());
        const auto out = op.compute_shape(shapes);
        EXPECT_EQ(out, shape(type::float32, {c.m, c.n}));
        const auto got = op.compute(out, args).to_vector<float>();
        EXPECT_LT(max_rel_diff(got, reference(a, q, s, z, c.m, c.k, c.n, c.bs)), 1e-6) << c.k;
    }
}

TEST(matmul_int4, cpu_kernels_equal_a_plain_dequantize_and_matmul) {
    using namespace kiln::cpu;
    std::vector<std::pair<const char*, int4g::part_fn>> variants{{"generic", int4g::generic_part()}};
    if (has_avx2_fma()) variants.push_back({"avx2", int4g::avx2_part()});
    if (has_avx512()) variants.push_back({"avx512", int4g::avx512_part()});
    std::mt19937 rng(2);
    for (const case_data c : {case_data{1, 45, 37, 32, false}, case_data{5, 100, 16, 32, true}, case_data{9, 64, 50, 16, false},
                              case_data{4, 31, 7, 32, true}, case_data{13, 257, 33, 64, false},
                              case_data{20, 900, 40, 32, true}}) {
        const std::size_t nb = (c.k + c.bs - 1) / c.bs;
        const auto a = random_values(rng, c.m * c.k);
        const auto q = random_int4(rng, c.k * c.n);
        const auto s = random_values(rng, nb * c.n, 0.1f);
        const auto z = c.zero_points ? random_int4(rng, nb * c.n) : std::vector<int>{};
        const auto qb = nibbles(q);
        const auto zb = nibbles(z);
        const auto packed = pack_int4_weights(qb.data(), s.data(), c.zero_points ? zb.data() : nullptr, c.k, c.n, c.bs);
        // The panels hold half a byte per weight (16-column panels: padded columns only).
        EXPECT_EQ(packed.b.size(), int4g::panels(c.n) * c.k * int4g::panel_bytes);
        const auto want = reference(a, q, s, z, c.m, c.k, c.n, c.bs);
        for (auto [name, part] : variants) {
            std::vector<float> y(c.m * c.n, -1.0f);
            int4g::args g;
            g.m = c.m, g.n = c.n, g.k = c.k, g.block = c.bs;
            g.a = a.data(), g.b = packed.b.data(), g.so = packed.so.data(), g.c = y.data();
            std::vector<float> asum(c.m * int4g::blocks(g));
            int4g::fill_block_sums(g, asum.data());
            g.asum = asum.data();
            part(g, 0, c.m, 0, int4g::panels(c.n));
            EXPECT_LT(max_rel_diff(y, want), 1e-5) << name << " m " << c.m << " k " << c.k << " n " << c.n;
        }
        // The whole product on the team, both ways: register tiles, and unpacked k blocks
        // multiplied by the packed GEMM's kernels (many rows), for each ISA this CPU runs.
        for (auto cap : {isa_cap::none, isa_cap::avx2, isa_cap::generic})
            for (bool wide : {false, true}) {
                const auto kernels = int4_kernels_for(cap);
                std::vector<float> y(c.m * c.n, -1.0f);
                int4g::args g;
                g.m = c.m, g.n = c.n, g.k = c.k, g.block = c.bs;
                g.a = a.data(), g.b = packed.b.data(), g.so = packed.so.data(), g.c = y.data();
                run_int4_gemm(g, kernels, wide);
                EXPECT_LT(max_rel_diff(y, want), 1e-5) << kernels.isa << (wide ? " wide" : "") << " m " << c.m;
            }
    }
}

namespace {

// x [2, 3, K] -> matmul [K, N] -> gemm (trans_b, alpha 0.5, beta 2, bias) -> relu, K odd.
constexpr std::size_t K = 45, N = 19, N2 = 11;
program make_mlp() {
    std::mt19937 rng(3);
    std::map<std::string, literal> named = {
        {"w1", literal(shape(type::float32, {K, N}), random_values(rng, K * N, 0.2f))},
        {"w2", literal(shape(type::float32, {N2, N}), random_values(rng, N2 * N, 0.3f))},
        {"b2", literal(shape(type::float32, {N2}), random_values(rng, N2, 0.1f))}};
    return parse_program(R"(
        module main
          x = @param -> float32[6, 45]
          w1 = @literal{float32[45, 19] {...}}
          w2 = @literal{float32[11, 19] {...}}
          b2 = @literal{float32[11] {...}}
          h = matmul(x, w1)
          r = relu(h)
          g = gemm{alpha=0.5, beta=2, trans_b=1}(r, w2, b2)
          @return(g)
    )", {literals_by_name(named)});
}

param_map random_input(const program& p, unsigned seed) {
    std::mt19937 rng(seed);
    param_map m;
    for (auto& [name, s] : p.get_parameter_shapes()) m[name] = literal(s, random_values(rng, s.elements())).get_argument();
    return m;
}

int count(const program& p, const std::string& op) {
    int n = 0;
    for (const auto& ins : *p.get_main_module())
        n += ins.name() == op || ins.get_operator().to_string().find("name: \"" + op + "\"") != std::string::npos;
    return n;
}

}  // namespace

TEST(quantize_int4_weights, rewrites_matmul_and_gemm_close_to_float32) {
    auto fp32 = make_mlp();
    auto q = fp32;
    const auto s = quantize_int4_weights(q, 32);
    EXPECT_EQ(s.quantized_ops, 2u);
    EXPECT_TRUE(s.skipped.empty());
    EXPECT_EQ(count(q, "matmul_int4"), 2);
    EXPECT_EQ(count(q, "matmul") + count(q, "gemm"), 0);
    EXPECT_EQ(quantized_type(q), type::int4);
    // 4 bits per weight plus a 4-byte scale per 32 (or fewer: the odd K's last block).
    EXPECT_EQ(s.weight_bytes_after, (K * N + 1) / 2 + 2 * N * 4 + (N * N2 + 1) / 2 + N2 * 4);
    const auto in = random_input(fp32, 4);
    auto want_p = fp32;
    want_p.compile(*get_target("ref"));
    const auto want32 = want_p.eval(in).at(0).to_vector<float>();
    std::vector<double> want(want32.begin(), want32.end());
    std::map<std::string, std::vector<float>> got;
    for (const std::string t : {"ref", "cpu"}) {
        auto c = q;
        c.compile(*get_target(t));
        got[t] = c.eval(in).at(0).to_vector<float>();
        // Gaussian weights in blocks of 32: the step is about amax / 7.5 = 0.28 sigma, a
        // relative weight error of about 0.08 per layer; two layers measured 0.115.
        EXPECT_LT(rel_l2(got[t], want), 0.15) << t;
        EXPECT_GT(rel_l2(got[t], want), 1e-4) << t << ": the weights were not quantized";
    }
    std::vector<double> ref(got["ref"].begin(), got["ref"].end());
    EXPECT_LT(max_rel_diff(got["cpu"], ref), 1e-5);
}

TEST(quantize_int4_weights, cpu_runs_int4_panels_and_kiln_round_trips) {
    auto q = make_mlp();
    quantize_int4_weights(q);
    const auto in = random_input(q, 5);
    auto bytes = save_buffer(q);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(quantized_type(loaded), type::int4);
    EXPECT_EQ(loaded.get_main_module()->to_string(), q.get_main_module()->to_string());
    for (const std::string t : {"ref", "cpu"}) {
        auto c = q;
        c.compile(*get_target(t));
        if (t == "cpu") {
            EXPECT_EQ(count(c, "cpu::int4_gemm"), 2);
            // No float32 copy of the weights: every float32 literal is smaller than a weight matrix.
            for (const auto& ins : *c.get_main_module()) {
                if (ins.is_literal() && ins.get_shape().get_type() == type::float32) {
                    EXPECT_LT(ins.get_shape().elements(), K * N / 4) << ins.get_shape().to_string();
                }
            }
        }
        const auto want = c.eval(in).at(0).to_vector<float>();
        auto b = save_buffer(c);
        auto l = load_buffer(b.data(), b.size());
        EXPECT_EQ(l.eval(in).at(0).to_vector<float>(), want) << t;
        auto lc = loaded;
        lc.compile(*get_target(t));
        EXPECT_EQ(lc.eval(in).at(0).to_vector<float>(), want) << t;
    }
}

TEST(quantize_int4_weights, refusals_and_what_stays_float32) {
    auto q = make_mlp();
    EXPECT_THROW(quantize_int4_weights(q, 0), kiln::error);
    quantize_int4_weights(q);
    EXPECT_THROW(quantize_int4_weights(q), kiln::error);  // already quantized
    auto c = make_mlp();
    c.compile(*get_target("ref"));
    EXPECT_THROW(quantize_int4_weights(c), kiln::error);  // compiled
    // A product of two activations stays float32.
    auto p = parse_program(R"(
        module main
          x = @param -> float32[4, 8]
          y = @param -> float32[8, 3]
          z = matmul(x, y)
          @return(z)
    )");
    const auto s = quantize_int4_weights(p);
    EXPECT_EQ(s.quantized_ops, 0u);
    ASSERT_EQ(s.skipped.size(), 1u);
    EXPECT_NE(s.skipped[0].find("weights not a 2-D float32 constant"), std::string::npos);
}

// ONNX opset 21: DequantizeLinear of INT4 weights, blocked along K with zero points, and of
// UINT4 weights per column, each read by a MatMul: both become matmul_int4 on ref and cpu,
// with the values the unfused DequantizeLinear + MatMul give (computed here).
TEST(fuse_int4_weights, onnx_int4_dequantize_linear_into_matmul_int4) {
    constexpr std::size_t k = 40, n = 6, bs = 16, nb = 3;
    std::mt19937 rng(6);
    const auto q = random_int4(rng, k * n);
    const auto z = random_int4(rng, nb * n);
    const auto s = random_values(rng, nb * n, 0.1f);
    std::vector<int> u(k * n);
    std::uniform_int_distribution<int> d(0, 15);
    for (auto& x : u) x = d(rng);
    const auto su = random_values(rng, n, 0.1f);
    std::map<std::string, literal> named = {
        {"q", literal(shape(type::int4, {k, n}), q)},
        {"z", literal(shape(type::int4, {nb, n}), z)},
        {"s", literal(shape(type::float32, {nb, n}), s)},
        {"u", literal(shape(type::uint4, {k, n}), u)},
        {"su", literal(shape(type::float32, {n}), su)}};
    auto p = parse_program(R"(
        module main
          x = @param -> float32[3, 40]
          q = @literal{int4[40, 6] {...}}
          z = @literal{int4[3, 6] {...}}
          s = @literal{float32[3, 6] {...}}
          u = @literal{uint4[40, 6] {...}}
          su = @literal{float32[6] {...}}
          w = dequantize_linear{axis=0, block_size=16}(q, s, z)
          wu = dequantize_linear{axis=1}(u, su)
          y = matmul(x, w)
          yu = matmul(x, wu)
          @return(y, yu)
    )", {literals_by_name(named)});
    const auto in = random_input(p, 7);
    const auto x = in.at("x").to_vector<float>();
    std::vector<int> u_signed(u.size());
    for (std::size_t i = 0; i < u.size(); ++i) u_signed[i] = u[i];
    const auto want = reference(x, q, s, z, 3, k, n, bs);
    std::vector<float> su_blocks(su);
    const auto want_u = reference(x, u_signed, su_blocks, {}, 3, k, n, k);
    for (const std::string t : {"ref", "cpu"}) {
        auto c = p;
        c.compile(*get_target(t));
        EXPECT_EQ(count(c, t == "cpu" ? "cpu::int4_gemm" : "matmul_int4"), 2) << t;
        EXPECT_EQ(count(c, "dequantize_linear"), 0) << t;
        const auto out = c.eval(in);
        EXPECT_LT(max_rel_diff(out.at(0).to_vector<float>(), want), 1e-5) << t;
        EXPECT_LT(max_rel_diff(out.at(1).to_vector<float>(), want_u), 1e-5) << t;
    }
}
