// quantize_int8: the QDQ rewrite (what is quantized, what stays float32), that fuse_qdq
// turns it into quant_convolution / quant_dot on ref and cpu, the error against float32,
// the three calibration methods, the scales file, .kiln round trips and the refusals.
#include <kiln/errors.hpp>
#include <kiln/module_text.hpp>
#include <kiln/program.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <sstream>

using namespace kiln;
namespace fs = std::filesystem;

namespace {

std::vector<float> random_values(std::mt19937& rng, std::size_t n, float scale = 1.0f) {
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = d(rng);
    return v;
}

// conv -> relu -> conv -> residual add -> relu -> flatten -> gemm, and the attention-like
// product of two activations -> softmax.
program make_cnn() {
    std::mt19937 rng(7);
    std::map<std::string, literal> named = {
        {"w1", literal(shape(type::float32, {8, 3, 3, 3}), random_values(rng, 8 * 3 * 9, 0.3f))},
        {"b1", literal(shape(type::float32, {8}), random_values(rng, 8, 0.1f))},
        {"w2", literal(shape(type::float32, {8, 8, 3, 3}), random_values(rng, 8 * 8 * 9, 0.15f))},
        {"wg", literal(shape(type::float32, {512, 10}), random_values(rng, 512 * 10, 0.05f))},
        {"bg", literal(shape(type::float32, {10}), random_values(rng, 10, 0.1f))}};
    return parse_program(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w1 = @literal{float32[8, 3, 3, 3] {...}}
          b1 = @literal{float32[8] {...}}
          w2 = @literal{float32[8, 8, 3, 3] {...}}
          wg = @literal{float32[512, 10] {...}}
          bg = @literal{float32[10] {...}}
          c1 = convolution{padding=[1, 1, 1, 1]}(x, w1, b1)
          r1 = relu(c1)
          c2 = convolution{padding=[1, 1, 1, 1]}(r1, w2)
          a = add(c2, r1)
          r2 = relu(a)
          f = flatten{axis=1}(r2)
          g = gemm(f, wg, bg)
          @return(g)
    )", {literals_by_name(named)});
}

program make_attention() {
    std::mt19937 rng(8);
    std::map<std::string, literal> named = {
        {"wq", literal(shape(type::float32, {16, 16}), random_values(rng, 256, 0.25f))},
        {"wk", literal(shape(type::float32, {16, 16}), random_values(rng, 256, 0.25f))}};
    return parse_program(R"(
        module main
          x = @param -> float32[6, 16]
          wq = @literal{float32[16, 16] {...}}
          wk = @literal{float32[16, 16] {...}}
          q = matmul(x, wq)
          k = matmul(x, wk)
          kt = transpose{perm=[1, 0]}(k)
          s = matmul(q, kt)
          p = softmax{axis=1}(s)
          @return(p)
    )", {literals_by_name(named)});
}

param_map random_inputs(const program& p, unsigned seed, float outlier = 0) {
    std::mt19937 rng(seed);
    param_map m;
    for (auto& [name, s] : p.get_parameter_shapes()) {
        auto v = random_values(rng, s.elements());
        if (outlier != 0) v[seed % v.size()] = outlier;
        m[name] = argument(literal(s, v).get_argument());
    }
    return m;
}

std::vector<param_map> calibration_sets(const program& p, std::size_t n, float outlier = 0) {
    std::vector<param_map> sets;
    for (std::size_t i = 0; i < n; ++i) sets.push_back(random_inputs(p, 100 + static_cast<unsigned>(i), outlier));
    return sets;
}

double rel_l2(const argument& got, const argument& want) {
    auto g = got.to_vector<double>();
    auto w = want.to_vector<double>();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
        num += (g[i] - w[i]) * (g[i] - w[i]);
        den += w[i] * w[i];
    }
    return std::sqrt(num / den);
}

// Instructions by op, a compiled ref program's kernels by the op they run (ref::kernel{op={name: "..."}}).
std::map<std::string, int> op_counts(const program& p) {
    std::map<std::string, int> n;
    std::regex inner("^ref::kernel\\{op=\\{name: \"([a-z_]+)\"");
    for (const auto& ins : *p.get_main_module()) {
        std::smatch m;
        const auto text = ins.get_operator().to_string();
        if (std::regex_search(text, m, inner)) ++n[m[1]];
        else ++n[ins.name()];
    }
    return n;
}

argument run(program p, const std::string& target, const param_map& in) {
    p.compile(*get_target(target));
    return p.eval(in).at(0);
}

std::string read_file(const fs::path& f) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The "scale" values of the activations in a scales file, in order.
std::vector<double> activation_scales(const std::string& json) {
    std::vector<double> out;
    const auto acts = json.substr(0, json.find("\"weights\""));
    std::regex re("\"scale\": ([0-9.e+-]+)");
    for (auto it = std::sregex_iterator(acts.begin(), acts.end(), re); it != std::sregex_iterator(); ++it)
        out.push_back(std::stod((*it)[1]));
    return out;
}

}  // namespace

TEST(quantize_int8, rewrites_to_qdq_and_keeps_the_rest_float32) {
    auto p = make_cnn();
    const auto s = quantize_int8(p, *get_target("ref"), calibration_sets(p, 4));
    EXPECT_EQ(s.quantized_ops, 3u);
    EXPECT_EQ(s.activation_tensors, 3u);  // x, r1, f
    EXPECT_EQ(s.calibration_runs, 4u);
    EXPECT_TRUE(s.skipped.empty());
    auto n = op_counts(p);
    EXPECT_EQ(n["quantize_linear"], 3);
    EXPECT_EQ(n["dequantize_linear"], 6);  // 3 activations, 3 weights
    EXPECT_EQ(n["add"], 1);                // the residual add stays float32
    EXPECT_EQ(quantized_type(p), type::int8);
    EXPECT_EQ(p.get_parameter_shapes().at("x").get_type(), type::float32);
    EXPECT_EQ(p.get_output_shapes().at(0).get_type(), type::float32);
    // Activations uint8 (asymmetric), weights int8 per output channel.
    for (const auto& ins : *p.get_main_module()) {
        if (ins.name() == "quantize_linear") {
            EXPECT_EQ(ins.get_shape().get_type(), type::uint8);
        }
        if (ins.name() == "dequantize_linear" && ins.inputs()[0]->is_literal()) {
            EXPECT_EQ(ins.inputs()[0]->get_shape().get_type(), type::int8);
            EXPECT_GT(ins.inputs()[1]->get_shape().elements(), 1u);
        }
    }
}

// Two residual blocks: each add's relu is read by a convolution (so it is quantized anyway)
// and by the next add; the last add feeds a softmax, so it stays float32.
program make_residual_cnn() {
    std::mt19937 rng(9);
    std::map<std::string, literal> named = {
        {"w0", literal(shape(type::float32, {8, 3, 3, 3}), random_values(rng, 8 * 3 * 9, 0.3f))},
        {"w1", literal(shape(type::float32, {8, 8, 3, 3}), random_values(rng, 8 * 8 * 9, 0.15f))},
        {"w2", literal(shape(type::float32, {8, 8, 1, 1}), random_values(rng, 8 * 8, 0.3f))},
        {"w3", literal(shape(type::float32, {8, 8, 3, 3}), random_values(rng, 8 * 8 * 9, 0.15f))}};
    return parse_program(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w0 = @literal{float32[8, 3, 3, 3] {...}}
          w1 = @literal{float32[8, 8, 3, 3] {...}}
          w2 = @literal{float32[8, 8, 1, 1] {...}}
          w3 = @literal{float32[8, 8, 3, 3] {...}}
          c0 = convolution{padding=[1, 1, 1, 1]}(x, w0)
          r0 = relu(c0)
          c1 = convolution{padding=[1, 1, 1, 1]}(r0, w1)
          a1 = add(c1, r0)
          r1 = relu(a1)
          c2 = convolution(r1, w2)
          a2 = add(c2, r1)
          r2 = relu(a2)
          c3 = convolution{padding=[1, 1, 1, 1]}(r2, w3)
          a3 = add(c3, r2)
          s = softmax{axis=1}(a3)
          @return(s)
    )", {literals_by_name(named)});
}

TEST(quantize_int8, residual_adds_whose_result_is_quantized_become_quant_add) {
    const auto in = random_inputs(make_residual_cnn(), 5);
    {
        auto p = make_residual_cnn();
        int8_options o;
        o.quantize_adds = false;
        const auto s = quantize_int8(p, *get_target("ref"), calibration_sets(p, 4), o);
        EXPECT_EQ(s.quantized_adds, 0u);
        EXPECT_EQ(s.activation_tensors, 4u);  // x, r0, r1, r2
    }
    // fuse_residual (the default): c1 and c2 read only by their adds take them (no Q/DQ of
    // their own; quant_convolution with a residual operand); off: requantize + quant_add.
    for (const bool fuse : {true, false})
        for (const std::string target : {"ref", "cpu"}) {
            auto p = make_residual_cnn();
            int8_options o;
            o.fuse_residual = fuse;
            const auto s = quantize_int8(p, *get_target(target), calibration_sets(p, 8), o);
            EXPECT_EQ(s.quantized_ops, 4u);
            EXPECT_EQ(s.quantized_adds, 2u);  // a1 and a2; a3 feeds the softmax
            EXPECT_EQ(s.residual_convolutions, fuse ? 2u : 0u);
            EXPECT_EQ(s.activation_tensors, fuse ? 4u : 6u);  // x, r0, r1, r2 (, c1, c2)
            auto compiled = p;
            compiled.compile(*get_target(target));
            std::size_t residuals = 0;  // quant_convolution on ref, cpu::quant_conv on cpu (with VNNI)
            for (const auto& ins : *compiled.get_main_module())
                if (ins.get_operator().to_string().find("has_residual: true") != std::string::npos) ++residuals;
            if (target == "ref") {
                auto n = op_counts(compiled);
                EXPECT_EQ(n["quant_add"], fuse ? 0 : 2) << compiled.get_main_module()->to_string();
                EXPECT_EQ(n["quant_convolution"], 4);
                EXPECT_EQ(residuals, fuse ? 2u : 0u);
                EXPECT_EQ(n["add"], 1);
                EXPECT_EQ(n["relu"], 0);  // folded into the requantizes (and the two quant_adds)
            }
            const auto want = run(make_residual_cnn(), target, in);
            const double err = rel_l2(compiled.eval(in).at(0), want);
            std::cout << "int8 with quantized adds (fuse_residual " << fuse << ") vs float32 on " << target
                      << ": rel. L2 " << err << "\n";
            EXPECT_LT(err, 0.05) << target;
            EXPECT_GT(err, 0.0) << target;
        }
}

// conv -> relu -> max pool -> conv: the pool's input is quantized with its result's scale and
// zero point (changing no value), so the pool runs on 8-bit values and the first convolution
// requantizes with its relu.
TEST(quantize_int8, max_pool_between_quantized_products_runs_on_8_bits) {
    std::mt19937 rng(11);
    std::map<std::string, literal> named = {
        {"w0", literal(shape(type::float32, {8, 3, 3, 3}), random_values(rng, 8 * 3 * 9, 0.3f))},
        {"w1", literal(shape(type::float32, {8, 8, 3, 3}), random_values(rng, 8 * 8 * 9, 0.15f))}};
    const char* text = R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w0 = @literal{float32[8, 3, 3, 3] {...}}
          w1 = @literal{float32[8, 8, 3, 3] {...}}
          c0 = convolution{padding=[1, 1, 1, 1]}(x, w0)
          r0 = relu(c0)
          p = pooling{mode=1, lengths=[3, 3], stride=[2, 2], padding=[1, 1, 1, 1]}(r0)
          c1 = convolution{padding=[1, 1, 1, 1]}(p, w1)
          @return(c1)
    )";
    auto make = [&] { return parse_program(text, {literals_by_name(named)}); };
    const auto in = random_inputs(make(), 6);
    for (const std::string target : {"ref", "cpu"}) {
        auto p = make();
        const auto s = quantize_int8(p, *get_target(target), calibration_sets(p, 4));
        EXPECT_EQ(s.quantized_ops, 2u);
        EXPECT_EQ(s.activation_tensors, 3u);  // x, p, and r0 with p's parameters
        auto compiled = p;
        compiled.compile(*get_target(target));
        if (target == "ref") {
            auto n = op_counts(compiled);
            EXPECT_EQ(n["quant_convolution"], 2) << compiled.get_main_module()->to_string();
            EXPECT_EQ(n["dequantize_linear"], 0);
            EXPECT_EQ(n["relu"], 0);
        }
        const double err = rel_l2(compiled.eval(in).at(0), run(make(), target, in));
        std::cout << "int8 with an 8-bit max pool vs float32 on " << target << ": rel. L2 " << err << "\n";
        EXPECT_LT(err, 0.05) << target;
        EXPECT_GT(err, 0.0) << target;
    }
}

TEST(quantize_int8, fuses_into_integer_ops_close_to_float32_on_ref_and_cpu) {
    const auto in = random_inputs(make_cnn(), 1);
    for (const std::string target : {"ref", "cpu"}) {
        auto p = make_cnn();
        quantize_int8(p, *get_target(target), calibration_sets(p, 8));
        auto compiled = p;
        compiled.compile(*get_target(target));
        auto n = op_counts(compiled);
        // The cpu target lowers them further (to oneDNN int8, or back to float kernels on a CPU
        // without VNNI: cpu::dequantize_without_vnni).
        if (target == "ref") {
            EXPECT_EQ(n["quant_convolution"], 2) << compiled.get_main_module()->to_string();
            EXPECT_EQ(n["quant_dot"], 1);
            EXPECT_EQ(n["dequantize_linear"], 0);
            EXPECT_EQ(n["convolution"], 0);
        }
        const auto want = run(make_cnn(), target, in);
        const auto got = compiled.eval(in).at(0);
        const double err = rel_l2(got, want);
        std::cout << "int8 vs float32 on " << target << ": rel. L2 " << err << "\n";
        EXPECT_LT(err, 0.05) << target;
        EXPECT_GT(err, 0.0) << target;
    }
}

TEST(quantize_int8, attention_products_of_two_activations) {
    auto p = make_attention();
    const auto in = random_inputs(p, 3);
    const auto s = quantize_int8(p, *get_target("ref"), calibration_sets(p, 4));
    EXPECT_EQ(s.quantized_ops, 3u);
    // The second operand of q k^T is int8 symmetric; the others uint8.
    int s8 = 0, u8 = 0;
    for (const auto& ins : *p.get_main_module())
        if (ins.name() == "quantize_linear") (ins.get_shape().get_type() == type::int8 ? s8 : u8)++;
    EXPECT_EQ(s8, 1);
    EXPECT_EQ(u8, 2);  // x (shared by both projections) and q
    EXPECT_EQ(op_counts(p)["softmax"], 1);
    auto compiled = p;
    compiled.compile(*get_target("ref"));
    EXPECT_EQ(op_counts(compiled)["quant_dot"], 3);
    EXPECT_LT(rel_l2(compiled.eval(in).at(0), run(make_attention(), "ref", in)), 0.15);  // softmax sharpens it
}

TEST(quantize_int8, methods_give_valid_different_scales) {
    const auto dir = fs::path(testing::TempDir());
    std::map<std::string, std::vector<double>> scales;
    for (const std::string method : {"minmax", "percentile", "entropy"}) {
        auto p = make_cnn();
        int8_options o;
        o.method = calibration_method_from_name(method);
        o.percentile = 99.0;
        o.dump_scales = (dir / ("kiln_int8_scales_" + method + ".json")).string();
        std::size_t progress_calls = 0;
        o.progress = [&](std::size_t done, std::size_t total) {
            ++progress_calls;
            EXPECT_LE(done, total);
        };
        // An outlier of 40 in each set's input: minmax takes it, the others clip it.
        const auto s = quantize_int8(p, *get_target("ref"), calibration_sets(p, 4, 40.0f), o);
        EXPECT_EQ(s.calibration_runs, method == "minmax" ? 4u : 8u) << method;
        EXPECT_EQ(progress_calls, s.calibration_runs) << method;
        const auto text = read_file(o.dump_scales);
        EXPECT_NE(text.find("\"method\": \"" + method + "\""), std::string::npos) << text;
        EXPECT_NE(text.find("\"weights\""), std::string::npos);
        scales[method] = activation_scales(text);
        ASSERT_EQ(scales[method].size(), 3u) << text;
        for (double v : scales[method]) EXPECT_TRUE(std::isfinite(v) && v > 0) << method << " " << v;
        // Still a working program.
        p.compile(*get_target("ref"));
        const auto in = random_inputs(make_cnn(), 5);
        EXPECT_LT(rel_l2(p.eval(in).at(0), run(make_cnn(), "ref", in)), 0.25) << method;
    }
    // The input's scale (the first): the outlier sets minmax's, the others are well below it.
    EXPECT_LT(scales["percentile"][0], 0.5 * scales["minmax"][0]);
    // Entropy keeps it: 4 outliers in 1536 values (0.26%) cost more divergence clipped than
    // the bulk's coarser steps do, as in TensorRT's form on enough data (a million values,
    // 0.26% at 40: it keeps 40 too, and clips at 1e-5; tests/tools/entropy_reference.py's
    // note). The raw histogram of these few values had clipped it, by sampling noise: one
    // histogram bin per level at the narrowest range makes its divergence zero whatever the
    // noise. entropy_keeps_a_post_relu_tail checks that a rare outlier is clipped.
    EXPECT_LE(scales["entropy"][0], scales["minmax"][0] * 1.0001);
    EXPECT_NE(scales["percentile"], scales["entropy"]);
}

// An input like a normalised grey image: 60% background (a spike at -0.8), the rest spread
// over (0, 2]. It is u8 with both signs, so entropy clips it over the signed histogram:
// folding the signs into |x| had clipped the positive side at the background's 0.8.
TEST(quantize_int8, entropy_keeps_the_positive_side_of_a_signed_u8_input) {
    auto p = make_cnn();
    std::vector<param_map> sets;
    for (unsigned k = 0; k < 4; ++k) {
        std::mt19937 rng(300 + k);
        std::uniform_real_distribution<float> bright(0.0f, 2.0f), coin(0.0f, 1.0f);
        const shape s = p.get_parameter_shapes().at("x");
        std::vector<float> v(s.elements());
        for (auto& x : v) x = coin(rng) < 0.6f ? -0.8f : bright(rng);
        sets.push_back({{"x", argument(literal(s, v).get_argument())}});
    }
    int8_options o;
    o.method = calibration_method::entropy;
    o.dump_scales = (fs::path(testing::TempDir()) / "kiln_int8_signed_entropy.json").string();
    quantize_int8(p, *get_target("ref"), sets, o);
    const auto text = read_file(o.dump_scales);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex("\"tensor\": \"x\".*?\"max\": ([0-9.e+-]+)"))) << text;
    EXPECT_GT(std::stod(m[1]), 1.5) << text;  // the positive side kept (its top clipped at most)
}

// A post-ReLU-like activation of 65536 values: half zeros, four point masses of 5% each at
// 0.15, 0.3, 0.45 and 0.6 (what a convolution makes of a flat background), an exponential tail,
// 0.3 * exp(-2x) of the values above x, up to 4.74, and one outlier of 40. Entropy should clip
// the outlier and nothing of the tail. TensorRT's KL search on the raw histogram measures the
// narrowest ranges at one histogram bin per level, where the quantized histogram equals the
// clipped one, while a wider range pays for spreading each point mass over its step; here
// that happens to land near the tail's end (5.02), on fashion_resnet's stem it clipped 3% of
// the values. The expected numbers come from an independent numpy computation,
// tests/tools/entropy_reference.py: T = 7.5 (bin 1536 of 8192: only the outlier clipped; the
// step 7.5 / 255 against minmax's 40 / 255).
TEST(quantize_int8, entropy_keeps_a_post_relu_tail) {
    std::mt19937 rng(11);
    std::map<std::string, literal> named = {
        {"w", literal(shape(type::float32, {64, 4}), random_values(rng, 64 * 4, 0.1f))}};
    auto p = parse_program(R"(
        module main
          x = @param -> float32[256, 64]
          w = @literal{float32[64, 4] {...}}
          y = matmul(x, w)
          @return(y)
    )", {literals_by_name(named)});
    constexpr std::size_t per_set = 256 * 64, sets = 4, total = per_set * sets;
    std::vector<param_map> calibration;
    for (std::size_t k = 0; k < sets; ++k) {
        std::vector<float> v(per_set);
        for (std::size_t i = 0; i < per_set; ++i) {
            const double u = (static_cast<double>(k * per_set + i) + 0.5) / static_cast<double>(total);
            double x = 0;
            if (u >= 0.7) x = -0.5 * std::log((1.0 - u) / 0.3);
            else if (u >= 0.5) x = 0.15 * (1 + std::floor((u - 0.5) / 0.05));
            if (k + 1 == sets && i + 1 == per_set) x = 40.0;  // in place of the tail's largest
            v[i] = static_cast<float>(x);
        }
        calibration.push_back({{"x", argument(literal(shape(type::float32, {256, 64}), v).get_argument())}});
    }
    int8_options o;
    o.method = calibration_method::entropy;
    o.dump_scales = (fs::path(testing::TempDir()) / "kiln_int8_post_relu_entropy.json").string();
    quantize_int8(p, *get_target("ref"), calibration, o);
    const auto text = read_file(o.dump_scales);
    std::smatch m;
    ASSERT_TRUE(std::regex_search(text, m, std::regex("\"tensor\": \"x\".*?\"seen_max\": ([0-9.e+-]+).*?\"min\": ([0-9.e+-]+), \"max\": ([0-9.e+-]+)")))
        << text;
    EXPECT_EQ(std::stod(m[1]), 40.0) << text;
    EXPECT_EQ(std::stod(m[2]), 0.0) << text;
    // Within two candidates (amax / 2048 apart) of the reference: libm's log may move a value
    // across a bin edge.
    EXPECT_NEAR(std::stod(m[3]), 7.5, 2 * 40.0 / 2048) << text;
    EXPECT_GT(std::stod(m[3]), 4.75) << text;  // the tail (up to 4.7405) kept whole
}

TEST(quantize_int8, kiln_round_trip_before_and_after_compile) {
    auto p = make_cnn();
    const auto in = random_inputs(p, 9);
    quantize_int8(p, *get_target("ref"), calibration_sets(p, 2));
    // Before compile: the scales are literals of the program.
    auto bytes = save_buffer(p);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(quantized_type(loaded), type::int8);
    EXPECT_EQ(loaded.get_main_module()->to_string(), p.get_main_module()->to_string());
    for (const std::string target : {"ref", "cpu"}) {
        auto c = p;
        c.compile(*get_target(target));
        const auto want = c.eval(in).at(0).to_vector<float>();
        auto b = save_buffer(c);
        auto l = load_buffer(b.data(), b.size());
        EXPECT_TRUE(l.is_compiled());
        EXPECT_EQ(quantized_type(l), type::int8);
        EXPECT_EQ(l.eval(in).at(0).to_vector<float>(), want) << target;
        auto lc = loaded;
        lc.compile(*get_target(target));
        EXPECT_EQ(lc.eval(in).at(0).to_vector<float>(), want) << target;
    }
}

TEST(quantize_int8, op_choice) {
    auto p = make_cnn();
    int8_options o;
    o.ops = {"convolution"};
    auto s = quantize_int8(p, *get_target("ref"), calibration_sets(p, 1), o);
    EXPECT_EQ(s.quantized_ops, 2u);
    EXPECT_EQ(op_counts(p)["gemm"], 1);
    auto q = make_cnn();
    o.ops = {"dot"};
    s = quantize_int8(q, *get_target("ref"), calibration_sets(q, 1), o);
    EXPECT_EQ(s.quantized_ops, 1u);
}

TEST(quantize_int8, refusals) {
    auto p = make_cnn();
    const auto& ref = *get_target("ref");
    auto code = [&](auto f) {
        try {
            f();
        } catch (const error& e) {
            return e.code();
        }
        return error_code::runtime;  // did not throw
    };
    EXPECT_EQ(code([&] { quantize_int8(p, ref, {}); }), error_code::invalid_argument);
    int8_options bad_op;
    bad_op.ops = {"softmax"};
    EXPECT_EQ(code([&] { quantize_int8(p, ref, calibration_sets(p, 1), bad_op); }), error_code::invalid_argument);
    EXPECT_EQ(code([&] { calibration_method_from_name("kl"); }), error_code::invalid_argument);
    int8_options bad_percentile;
    bad_percentile.method = calibration_method::percentile;
    bad_percentile.percentile = 20;
    EXPECT_EQ(code([&] { quantize_int8(p, ref, calibration_sets(p, 1), bad_percentile); }), error_code::invalid_argument);
    // Nothing changed by the refusals.
    EXPECT_EQ(op_counts(p)["quantize_linear"], 0);
    quantize_int8(p, ref, calibration_sets(p, 1));
    EXPECT_EQ(code([&] { quantize_int8(p, ref, calibration_sets(p, 1)); }), error_code::invalid_argument);
    auto c = make_cnn();
    c.compile(ref);
    EXPECT_EQ(code([&] { quantize_int8(c, ref, calibration_sets(make_cnn(), 1)); }), error_code::invalid_argument);
}

// quantize_fp8 shares the choice of ops and the calibration: activations and weights become
// float8 e4m3fn with one scale each, amax / 448 (checked against the calibration inputs' and
// the weights' own amax), and no zero points.
TEST(quantize_fp8, e4m3fn_per_tensor_scales_from_the_calibrated_amax) {
    auto p = make_cnn();
    const auto sets = calibration_sets(p, 3);
    std::map<std::string, double> weight_amax;
    std::map<std::string, std::vector<float>> weight_values;
    for (const auto& ins : *p.get_main_module())
        if (ins.is_literal() && ins.get_shape().elements() > 16) {
            double a = 0;
            for (float v : ins.get_literal().to_vector<float>()) a = std::max(a, std::fabs(double(v)));
            weight_amax[ins.get_shape().to_string()] = a;
            weight_values[ins.get_shape().to_string()] = ins.get_literal().to_vector<float>();
        }
    double x_amax = 0;
    for (const auto& s : sets)
        for (float v : s.at("x").to_vector<float>()) x_amax = std::max(x_amax, std::fabs(double(v)));
    const auto s = quantize_fp8(p, *get_target("ref"), sets);
    EXPECT_EQ(s.quantized_ops, 3u);
    EXPECT_EQ(quantized_type(p), type::float8e4m3fn);
    auto n = op_counts(p);
    EXPECT_EQ(n["quantize_linear"], 3);
    EXPECT_EQ(n["dequantize_linear"], 6);
    int weights = 0;
    bool saw_x = false;
    for (const auto& ins : *p.get_main_module()) {
        if (ins.name() != "quantize_linear" && ins.name() != "dequantize_linear") continue;
        EXPECT_EQ(ins.inputs().size(), 2u);  // no zero point
        const double scale = ins.inputs()[1]->get_literal().to_vector<double>().at(0);
        EXPECT_EQ(ins.inputs()[1]->get_shape().elements(), 1u);
        if (ins.name() == "quantize_linear") {
            EXPECT_EQ(ins.get_shape().get_type(), type::float8e4m3fn);
            if (ins.inputs()[0]->is_param()) {
                saw_x = true;
                EXPECT_NEAR(scale, x_amax / 448.0, 1e-6 * scale);
            }
        } else if (ins.inputs()[0]->is_literal()) {
            ++weights;
            EXPECT_EQ(ins.inputs()[0]->get_shape().get_type(), type::float8e4m3fn);
            auto lens = ins.inputs()[0]->get_shape().lens();
            const auto key = shape(type::float32, lens).to_string();
            EXPECT_NEAR(scale, weight_amax.at(key) / 448.0, 1e-6 * scale);
            // Each weight within half a step of e4m3 (3 mantissa bits: 2^-4 relative; the
            // subnormals' absolute step 2^-9 below 2^-6), times the scale.
            const auto q = ins.inputs()[0]->get_literal().to_vector<double>();
            const auto& w = weight_values.at(key);
            for (std::size_t i = 0; i < w.size(); ++i)
                EXPECT_LE(std::fabs(q[i] * scale - w[i]), std::fabs(w[i]) / 16 + scale / 1024 + 1e-12) << i;
        }
    }
    EXPECT_EQ(weights, 3);
    EXPECT_TRUE(saw_x);
}

TEST(quantize_fp8, close_to_float32_on_ref_and_cpu_and_kiln_round_trip) {
    const auto in = random_inputs(make_cnn(), 1);
    auto p = make_cnn();
    quantize_fp8(p, *get_target("ref"), calibration_sets(p, 8));
    auto bytes = save_buffer(p);
    auto loaded = load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(quantized_type(loaded), type::float8e4m3fn);
    EXPECT_EQ(loaded.get_main_module()->to_string(), p.get_main_module()->to_string());
    std::vector<float> ref_out;
    for (const std::string target : {"ref", "cpu"}) {
        auto c = p;
        c.compile(*get_target(target));
        const auto got = c.eval(in).at(0);
        const double err = rel_l2(got, run(make_cnn(), target, in));
        std::cout << "fp8 vs float32 on " << target << ": rel. L2 " << err << "\n";
        // e4m3 keeps 3 mantissa bits: each rounding within 2^-4 relative, about 2.5% RMS per
        // tensor, where int8's uniform steps on these Gaussian values are about 0.4% of sigma;
        // three layers of it measured 0.114 (int8 0.020, the test above).
        EXPECT_LT(err, 0.2) << target;
        EXPECT_GT(err, 0.0) << target;
        auto b = save_buffer(c);
        auto l = load_buffer(b.data(), b.size());
        EXPECT_EQ(l.eval(in).at(0).to_vector<float>(), got.to_vector<float>()) << target;
        if (target == "ref") {
            ref_out = got.to_vector<float>();
        } else {
            // The same fp8 values; cpu sums the products in another order.
            argument r = literal(got.get_shape(), ref_out).get_argument();
            EXPECT_LT(rel_l2(got, r), 1e-4);
        }
    }
}
