// exhaustive_tune on the cpu target (tuning.hpp): a small residual CNN with a linear layer,
// tuned, matches the ref target; every problem with two or more candidates is measured and
// recorded in KILN_TUNING_CACHE with the fastest as its choice; the compiled program runs
// the recorded choices; a second compile reads the file (a choice written into it is
// followed, nothing is measured or written again); without exhaustive_tune nothing is
// measured or written. The same for a quantized network's int8 kernels (tuning_int8.hpp) on
// a CPU with AVX-512 VNNI.
#include "cpu_test_util.hpp"
#include "env_override.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"

#include "ops/quant_fused.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

namespace fs = std::filesystem;

value conv_attrs(std::int64_t pad) {
    return value::object{{"padding", value(value::array{pad, pad, pad, pad})}, {"group", value(1)}};
}

// x [1, 32, 14, 14]: relu(conv3x3 32->64), relu(conv3x3 64->64 + that), 1x1 64->64,
// global average, flatten, gemm 64->10.
builder net() {
    builder b;
    auto x = b.param("x", {1, 32, 14, 14});
    auto r = b.op("relu", {b.op("convolution", conv_attrs(1), {x, b.constant({64, 32, 3, 3}, 0.1f), b.constant({64})})});
    auto c2 = b.op("convolution", conv_attrs(1), {r, b.constant({64, 64, 3, 3}, 0.05f), b.constant({64})});
    auto y = b.op("relu", {b.op("add", {c2, r})});
    auto z = b.op("convolution", conv_attrs(0), {y, b.constant({64, 64, 1, 1}, 0.1f)});
    auto g = b.op("pooling", value::object{{"mode", value(0)}, {"global", value(true)}}, {z});
    auto f = b.op("flatten", value::object{{"axis", value(1)}}, {g});
    b.ret({b.op("gemm", {f, b.constant({64, 10}, 0.1f), b.constant({10})})});
    return b;
}

std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

struct line {
    std::string key, chosen;
    std::map<std::string, double> ms;
};

std::vector<line> lines_of(const std::string& text) {
    std::vector<line> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) {
        line x;
        const auto t1 = l.find('\t'), t2 = l.find('\t', t1 + 1);
        x.key = l.substr(0, t1);
        x.chosen = l.substr(t1 + 1, t2 - t1 - 1);
        std::istringstream ms(l.substr(t2 + 1));
        for (std::string item; ms >> item;) x.ms[item.substr(0, item.find('='))] = std::stod(item.substr(item.find('=') + 1));
        out.push_back(x);
    }
    return out;
}

// The record's choice is its fastest candidate, or the rules' own choice (named `rules`, or
// any when empty: the int8 records name it by its kernel) when no other beat it by more than
// the tuner's 10% margin (tuning.cpp, rule_margin).
void expect_fastest_or_the_rules_within_the_margin(const line& x, const std::string& rules) {
    double fastest = 1e300;
    for (const auto& [name, ms] : x.ms) {
        EXPECT_GT(ms, 0.0) << name;
        fastest = std::min(fastest, ms);
    }
    const double got = x.ms.at(x.chosen);
    if (got == fastest) return;
    if (!rules.empty()) {
        EXPECT_EQ(x.chosen, rules) << x.key << ": " << x.chosen << " is neither the fastest nor the rules'";
    }
    EXPECT_LE(got, fastest * 1.10 * (1 + 1e-9)) << x.key << ": " << x.chosen << " is over 10% slower than the fastest";
}

// The cpu ops each candidate lowers to.
const std::map<std::string, std::string> kernel_op = {
    {"winograd", "cpu::winograd_conv"}, {"winograd_f2", "cpu::winograd_conv"}, {"conv_gemm", "cpu::conv_gemm"},
    {"packed_gemm", "cpu::packed_gemm"}};

class cpu_tuning : public ::testing::Test {
protected:
    void SetUp() override {
        dir = fs::temp_directory_path() / ("kiln_tuning_test_" + std::to_string(::getpid()));
        fs::create_directories(dir);
        cache = dir / "tuning.txt";
    }
    void TearDown() override { fs::remove_all(dir); }
    fs::path dir, cache;
};

TEST_F(cpu_tuning, measures_records_and_runs_the_fastest) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling", "gemm", "relu", "add", "flatten");
    test::env_override file("KILN_TUNING_CACHE", cache.c_str());
    compile_options o;
    o.exhaustive_tune = true;
    auto r = run_both(net(), 1e-4, 1e-4, o);
    const auto records = lines_of(read(cache));
    // Both 3x3 convolutions have Winograd and oneDNN at least; the gemm packed_gemm and oneDNN.
    ASSERT_GE(records.size(), 3u) << read(cache);
    std::multiset<std::string> chosen_ops;
    for (const auto& x : records) {
        ASSERT_GE(x.ms.size(), 2u) << x.key;
        ASSERT_TRUE(x.ms.count(x.chosen)) << x.key;
        EXPECT_TRUE(x.ms.count("rules")) << x.key;  // what the rules run, measured beside
        expect_fastest_or_the_rules_within_the_margin(x, "rules");
        EXPECT_EQ(x.key.rfind(cpu::cpu_model(), 0), 0u) << x.key;
        if (kernel_op.count(x.chosen)) chosen_ops.insert(kernel_op.at(x.chosen));
    }
    // Each chosen kernel of Kiln's own appears in the program at least as often as chosen.
    for (const auto& op : chosen_ops) EXPECT_GE(count_ops(r.cpu, op), chosen_ops.count(op)) << op << "\n" << text(r.cpu);
}

TEST_F(cpu_tuning, second_compile_follows_the_file_without_measuring) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling", "gemm", "relu", "add", "flatten");
    test::env_override file("KILN_TUNING_CACHE", cache.c_str());
    compile_options o;
    o.exhaustive_tune = true;
    run_both(net(), 1e-4, 1e-4, o);
    // Every choice turned to oneDNN, with times that would never make it the fastest.
    std::string forced;
    for (const auto& x : lines_of(read(cache))) forced += x.key + "\tonednn\tonednn=1000 other=1\n";
    std::ofstream(cache, std::ios::trunc) << forced;
    auto r = run_both(net(), 1e-4, 1e-4, o);
    EXPECT_EQ(read(cache), forced);
    for (const auto& [name, op] : kernel_op) EXPECT_EQ(count_ops(r.cpu, op), 0u) << op << "\n" << text(r.cpu);
    EXPECT_GE(count_ops(r.cpu, "cpu::convolution"), 2u) << text(r.cpu);
}

// Winograd's two tile sizes are measured as candidates of their own (the rules choose F(2x2)
// only where F(4x4) has too few tiles; the tuner must be able to prefer it anywhere), and a
// recorded F(2x2) choice compiles to F(2x2).
TEST_F(cpu_tuning, winograd_tiles_are_separate_candidates) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling", "gemm", "relu", "add", "flatten");
    test::env_override file("KILN_TUNING_CACHE", cache.c_str());
    compile_options o;
    o.exhaustive_tune = true;
    run_both(net(), 1e-4, 1e-4, o);
    std::string forced;
    std::size_t both = 0;
    for (const auto& x : lines_of(read(cache))) {
        const bool f2 = x.ms.count("winograd_f2") > 0;
        if (f2 && x.ms.count("winograd")) ++both;
        forced += x.key + "\t" + (f2 ? "winograd_f2" : "onednn") + "\t" + (f2 ? "winograd_f2" : "onednn") + "=1 other=2\n";
    }
    EXPECT_EQ(both, 2u) << read(cache);  // the two 3x3 convolutions
    std::ofstream(cache, std::ios::trunc) << forced;
    auto r = run_both(net(), 1e-4, 1e-4, o);
    const auto t = text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::winograd_conv"), 2u) << t;
    EXPECT_EQ(t.find("winograd_conv{m=4"), std::string::npos) << t;
    EXPECT_NE(t.find("winograd_conv{m=2"), std::string::npos) << t;
}

TEST_F(cpu_tuning, off_measures_nothing) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling", "gemm", "relu", "add", "flatten");
    test::env_override file("KILN_TUNING_CACHE", cache.c_str());
    run_both(net(), 1e-4, 1e-4);
    EXPECT_FALSE(fs::exists(cache));
}

}  // namespace

namespace {

// The int8 kernels measured by exhaustive_tune (tuning_int8.hpp) and the cpu ops they lower to.
const std::map<std::string, std::string> int8_kernel_op = {{"int8_gemm_vnni", "cpu::int8_gemm"},
                                                           {"int8_depthwise", "cpu::int8_depthwise"}};

// u8 in, u8 out, per-channel weight scales, an int32 bias; `gain`: x_scale * w_scale / y_scale.
template <class Q>
Q quant(std::size_t channels, double gain) {
    Q q;
    q.x_scale = 0.02f;
    q.x_zero_point = 128;
    for (std::size_t c = 0; c < channels; ++c) q.w_scales.push_back(0.001f * static_cast<float>(1 + c % 7));
    q.w_scales.erase(q.w_scales.begin());
    q.has_bias = true;
    q.out_type = type::uint8;
    q.y_scale = static_cast<float>(0.02 * 0.001 / gain);
    q.y_zero_point = 128;
    q.y_min = 0;
    q.y_max = 255;
    return q;
}

// x u8 [1, 32, 28, 28]: 1x1 32 -> 64, depthwise 3x3, 1x1 64 -> 32 (MobileNetV2's block, channels-last
// between the layers); a u8 [64, 256] times constant int8 [256, 256] (bert's products). Gains that
// keep a level's difference in an input under a level in the output (oneDNN's kernels may round a
// value a level off).
builder quant_net() {
    builder b;
    auto xl = random_ints(type::uint8, {1, 32, 28, 28}, 0, 255);
    b.inputs["x"] = xl.get_argument();
    auto x = b.m->add_parameter("x", xl.get_shape());
    auto pointwise = [&](instruction_ref in, std::size_t cin, std::size_t cout) {
        auto q = quant<op::quant_convolution>(cout, 0.5 / (64.0 * static_cast<double>(cin)));
        q.padding = {0, 0, 0, 0};
        q.stride = {1, 1};
        q.dilation = {1, 1};
        return b.m->add_instruction(q, {in, b.m->add_literal(random_ints(type::int8, {cout, cin, 1, 1}, -127, 127)),
                                        b.m->add_literal(random_ints(type::int32, {cout}, -2000, 2000))});
    };
    auto c1 = pointwise(x, 32, 64);
    auto dw = quant<op::quant_convolution>(64, 0.5 / (64.0 * 9.0));
    dw.padding = {1, 1, 1, 1};
    dw.stride = {1, 1};
    dw.dilation = {1, 1};
    dw.group = 64;
    auto d1 = b.m->add_instruction(dw, {c1, b.m->add_literal(random_ints(type::int8, {64, 1, 3, 3}, -127, 127)),
                                        b.m->add_literal(random_ints(type::int32, {64}, -2000, 2000))});
    auto c2 = pointwise(d1, 64, 32);
    auto al = random_ints(type::uint8, {64, 256}, 0, 255);
    b.inputs["a"] = al.get_argument();
    auto a = b.m->add_parameter("a", al.get_shape());
    auto dq = quant<op::quant_dot>(256, 0.5 / (64.0 * 256.0));
    auto dot = b.m->add_instruction(dq, {a, b.m->add_literal(random_ints(type::int8, {256, 256}, -127, 127)),
                                         b.m->add_literal(random_ints(type::int32, {256}, -2000, 2000))});
    b.ret({c2, dot});
    return b;
}

// The int8 records of a tuning file.
std::vector<line> int8_lines(const std::string& text) {
    std::vector<line> out;
    for (auto& x : lines_of(text))
        if (x.key.find("|quant_convolution[") != std::string::npos || x.key.find("|quant_dot[") != std::string::npos)
            out.push_back(x);
    return out;
}

// Up to 3 levels where oneDNN's kernels run (a level off now and then, through three layers at
// most); bit-equal where only Kiln's own run.
constexpr double int8_levels = 3.0;

bool vnni() { return cpu::has_avx512_vnni() && cpu::has_int8_dot_product(); }

}  // namespace

TEST_F(cpu_tuning, int8_kernels_are_measured_and_the_fastest_runs) {
    if (!vnni()) GTEST_SKIP() << "no AVX-512 VNNI here: the int8 kernels have one candidate each";
    test::env_override file("KILN_TUNING_CACHE", cache.c_str());
    compile_options o;
    o.exhaustive_tune = true;
    auto r = run_both(quant_net(), 0.0, int8_levels, o);
    const auto records = int8_lines(read(cache));
    // The three convolutions; not the product, which keeps its rule (the VNNI GEMM): products
    // are not tuned (tuning_int8.cpp says why).
    ASSERT_EQ(records.size(), 3u) << read(cache);
    std::map<std::string, std::size_t> chosen;
    std::size_t depthwise = 0, vnni_gemm = 0;
    for (const auto& x : records) {
        ASSERT_GE(x.ms.size(), 2u) << x.key;
        ASSERT_TRUE(x.ms.count(x.chosen)) << x.key;
        EXPECT_TRUE(x.ms.count("onednn_int8")) << x.key;
        depthwise += x.ms.count("int8_depthwise");
        vnni_gemm += x.ms.count("int8_gemm_vnni");
        expect_fastest_or_the_rules_within_the_margin(x, "");
        EXPECT_EQ(x.key.rfind(cpu::cpu_model(), 0), 0u) << x.key;
        ++chosen[x.chosen];
    }
    EXPECT_EQ(depthwise, 1u) << read(cache);
    EXPECT_EQ(vnni_gemm, 2u) << read(cache);
    // The program runs exactly the chosen kernels (and the product its rule's, the VNNI GEMM).
    for (const auto& [name, op] : int8_kernel_op)
        EXPECT_EQ(count_ops(r.cpu, op), chosen[name] + (op == "cpu::int8_gemm" ? 1u : 0u)) << op << "\n" << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::quant_conv") + count_ops(r.cpu, "cpu::quant_matmul"), chosen["onednn_int8"])
        << text(r.cpu);
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}

TEST_F(cpu_tuning, int8_choices_in_the_file_are_followed) {
    if (!vnni()) GTEST_SKIP() << "no AVX-512 VNNI here: the int8 kernels have one candidate each";
    test::env_override file("KILN_TUNING_CACHE", cache.c_str());
    compile_options o;
    o.exhaustive_tune = true;
    run_both(quant_net(), 0.0, int8_levels, o);
    const auto records = int8_lines(read(cache));
    ASSERT_EQ(records.size(), 3u) << read(cache);
    for (const bool own : {true, false}) {
        SCOPED_TRACE(own ? "own kernels forced" : "oneDNN's forced");
        // Each choice turned to Kiln's kernel (or to oneDNN's), with times that would never make it the fastest.
        std::string forced;
        for (const auto& x : records) {
            std::string k = "onednn_int8";
            if (own) k = x.ms.count("int8_depthwise") ? "int8_depthwise" : "int8_gemm_vnni";
            forced += x.key + "\t" + k + "\t" + k + "=1000 other=1\n";
        }
        std::ofstream(cache, std::ios::trunc) << forced;
        // Bit-equal to ref on Kiln's kernels alone.
        auto r = run_both(quant_net(), 0.0, own ? 0.0 : int8_levels, o);
        EXPECT_EQ(read(cache), forced);  // nothing measured or written
        EXPECT_EQ(count_ops(r.cpu, "cpu::int8_gemm"), own ? 3u : 1u) << text(r.cpu);  // the product: its rule
        EXPECT_EQ(count_ops(r.cpu, "cpu::int8_depthwise"), own ? 1u : 0u) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::quant_conv"), own ? 0u : 3u) << text(r.cpu);
        EXPECT_EQ(count_ops(r.cpu, "cpu::quant_matmul"), 0u) << text(r.cpu);
    }
}

TEST_F(cpu_tuning, int8_off_keeps_the_rules) {
    if (!vnni()) GTEST_SKIP() << "no AVX-512 VNNI here";
    test::env_override file("KILN_TUNING_CACHE", cache.c_str());
    auto r = run_both(quant_net(), 0.0, int8_levels);
    EXPECT_FALSE(fs::exists(cache));
    // The rules: oneDNN's convolutions, the VNNI GEMM's product.
    EXPECT_EQ(count_ops(r.cpu, "cpu::quant_conv"), 3u) << text(r.cpu);
    EXPECT_EQ(count_ops(r.cpu, "cpu::int8_gemm"), 1u) << text(r.cpu);
    // And KILN_CPU_INT8_KERNELS set: its choice, nothing measured.
    test::env_override onednn("KILN_CPU_INT8_KERNELS", "onednn");
    compile_options o;
    o.exhaustive_tune = true;
    auto s = run_both(quant_net(), 0.0, int8_levels, o);
    EXPECT_TRUE(int8_lines(fs::exists(cache) ? read(cache) : "").empty()) << read(cache);
    EXPECT_EQ(count_ops(s.cpu, "cpu::quant_conv"), 3u) << text(s.cpu);
    EXPECT_EQ(count_ops(s.cpu, "cpu::quant_matmul"), 1u) << text(s.cpu);
}

namespace {

// x [?, 32, 14, 14] (batch 1 to 4) through a 3x3 convolution 32 -> 64: Winograd's by the rules.
program dynamic_conv() {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 4, {}}, {32, 32, {}}, {14, 14, {}}, {14, 14, {}}}));
    auto w = m->add_literal(random_literal({64, 32, 3, 3}, 0.1f));
    m->add_return({m->add_instruction(make_op("convolution", conv_attrs(1)), {x, w})});
    return p;
}

std::vector<std::string> ops_that_ran(const program& p, const param_map& in) {
    std::vector<instruction_profile> profile;
    p.eval(in, profile);
    std::vector<std::string> names;
    for (const auto& e : profile) names.push_back(e.op_name);
    return names;
}

}  // namespace

// A specialization compiled later, in the background, follows the switches the dynamic
// program was compiled with, not the environment as it is by then.
TEST(cpu_derived_context, specializations_keep_the_compile_time_switches) {
    KILN_CPU_NEEDS_OPS("convolution");
    program p = dynamic_conv();
    compile_options o;
    o.specialize_after = 1;
    {
        test::env_override no_winograd("KILN_CPU_WINOGRAD", "0");
        p.compile(*get_target("cpu"), o);
    }
    const param_map in{{"x", random_literal({2, 32, 14, 14}).get_argument()}};
    p.eval(in);  // queues the specialization for batch 2
    p.finish_specializations();
    ASSERT_EQ(p.get_specialization_stats().compiles, 1u);
    const auto ran = ops_that_ran(p, in);
    EXPECT_EQ(std::count(ran.begin(), ran.end(), "cpu::winograd_conv"), 0) << ::testing::PrintToString(ran);
    // The same program compiled without the switch does take Winograd there.
    program q = dynamic_conv();
    q.compile(*get_target("cpu"), o);
    q.eval(in);
    q.finish_specializations();
    const auto ran_q = ops_that_ran(q, in);
    EXPECT_EQ(std::count(ran_q.begin(), ran_q.end(), "cpu::winograd_conv"), 1) << ::testing::PrintToString(ran_q);
}
