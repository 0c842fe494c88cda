// Kiln's packed GEMM on the cpu target (cpu::packed_gemm): results match a double-precision
// product for many shapes (edge tiles in rows and columns, one and several K blocks), each
// fused post-op (bias, linear, relu, clip, binary ops with per-column vectors and with full
// residual tensors), batch dims folded into the rows, gemm's transposed B, alpha and C; on
// the AVX2 and on the baseline kernels; saved programs load and run; what it must not take
// (transposed A, a post-op it lacks, a transposed result) stays on oneDNN.
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"

#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

// gelu: the exported erf form, x * (1 + erf(x / sqrt 2)) * 0.5; gelu2: without the 0.5
// (BERT's and ViT's, the simplifier having moved it past the next matmul).
enum class step { bias, linear, relu, clip, gelu, gelu2, hardswish, add_col, sub_col, mul_col, max_col, add_full, sub_full, mul_full };

struct gemm_case {
    std::vector<std::size_t> batch;  // dims of A before [m, k]
    std::size_t m, k, n;
    std::vector<step> steps;
    bool gemm_trans_b = false;  // ONNX Gemm with B given as [n, k]
};

// The program, and the expected result with a bound on its rounding error per element.
struct built {
    builder b;
    std::vector<double> want, tol;
};

built build(const gemm_case& c) {
    built r;
    auto& b = r.b;
    auto lens = c.batch;
    lens.push_back(c.m);
    lens.push_back(c.k);
    auto a = b.param("a", lens);
    const float ws = 1.0f / std::sqrt(static_cast<float>(c.k));
    auto w = c.gemm_trans_b ? b.constant({c.n, c.k}, ws) : b.constant({c.k, c.n}, ws);
    instruction_ref y;
    if (c.gemm_trans_b) y = b.op("gemm", value::object{{"trans_b", value(true)}}, {a, w});
    else y = b.op("matmul", {a, w});
    const auto av = b.inputs["a"].to_vector<double>();
    const auto wv = w->get_literal().to_vector<double>();
    std::size_t rows = c.m;
    for (auto d : c.batch) rows *= d;
    auto dst = lens;
    dst.back() = c.n;
    r.want.assign(rows * c.n, 0.0);
    r.tol.assign(rows * c.n, 0.0);
    for (std::size_t i = 0; i < rows; ++i)
        for (std::size_t j = 0; j < c.n; ++j) {
            double s = 0, mag = 0;
            for (std::size_t kk = 0; kk < c.k; ++kk) {
                const double bw = c.gemm_trans_b ? wv[j * c.k + kk] : wv[kk * c.n + j];
                s += av[i * c.k + kk] * bw;
                mag += std::fabs(av[i * c.k + kk] * bw);
            }
            r.want[i * c.n + j] = s;
            r.tol[i * c.n + j] = mag;
        }
    int id = 0;
    for (auto st : c.steps) {
        const std::string name = "v" + std::to_string(id++);
        const bool col = st == step::add_col || st == step::sub_col || st == step::mul_col || st == step::max_col;
        const bool full = st == step::add_full || st == step::sub_full || st == step::mul_full;
        std::vector<double> src;
        instruction_ref x;
        if (st == step::bias) {
            x = b.constant({c.n});
            src = x->get_literal().to_vector<double>();
        } else if (col || full) {
            x = b.param(name, col ? std::vector<std::size_t>{c.n} : dst);
            src = b.inputs[name].to_vector<double>();
        }
        switch (st) {
        case step::bias:
        case step::add_col:
        case step::add_full: y = b.op("add", {y, x}); break;
        case step::sub_col:
        case step::sub_full: y = b.op("sub", {y, x}); break;
        case step::mul_col:
        case step::mul_full: y = b.op("mul", {y, x}); break;
        case step::max_col: y = b.op("max", {y, x}); break;
        case step::linear: y = b.op("add", {b.op("mul", {y, b.scalar(1.5f)}), b.scalar(-0.25f)}); break;
        case step::relu: y = b.op("relu", {y}); break;
        case step::clip: y = b.op("clip", {y, b.scalar(-0.3f), b.scalar(0.4f)}); break;
        case step::hardswish: y = b.op("hard_swish", {y}); break;
        case step::gelu:
        case step::gelu2: {
            auto e = b.op("erf", {b.op("div", {y, b.scalar(1.4142135f)})});
            y = b.op("mul", {y, b.op("add", {e, b.scalar(1.0f)})});
            if (st == step::gelu) y = b.op("mul", {y, b.scalar(0.5f)});
            break;
        }
        }
        for (std::size_t e = 0; e < r.want.size(); ++e) {
            double& v = r.want[e];
            const double s = src.empty() ? 0.0 : src[col || st == step::bias ? e % c.n : e];
            switch (st) {
            case step::bias:
            case step::add_col:
            case step::add_full: v += s; break;
            case step::sub_col:
            case step::sub_full: v -= s; break;
            case step::mul_col:
            case step::mul_full: v *= s; break;
            case step::max_col: v = std::max(v, s); break;
            case step::linear: v = 1.5 * v - 0.25; r.tol[e] *= 1.5; break;
            case step::relu: v = std::max(v, 0.0); break;
            case step::clip: v = std::min(std::max(v, -0.3), 0.4); break;
            case step::hardswish: v = v * std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0); break;
            case step::gelu: v = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); break;
            case step::gelu2: v = v * (1.0 + std::erf(v / std::sqrt(2.0))); r.tol[e] *= 2.0; break;
            }
        }
    }
    b.ret({y});
    for (std::size_t e = 0; e < r.want.size(); ++e) r.tol[e] = 1e-5 * (1.0 + r.tol[e] + std::fabs(r.want[e]));
    return r;
}

program compile_cpu(const builder& b) {
    program p = b.p;
    test::env_override no_grouping("KILN_CPU_FUSION", "0");  // chains stay with the product
    p.compile(*get_target("cpu"));
    return p;
}

const cpu::packed_gemm* find_op(const program& p) {
    for (const auto& ins : *p.get_main_module())
        if (auto* op = ins.get_operator().any_cast<cpu::packed_gemm>()) return op;
    return nullptr;
}

std::string describe(const gemm_case& c) {
    std::string s = std::to_string(c.m) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) + " steps";
    for (auto st : c.steps) s += " " + std::to_string(static_cast<int>(st));
    return s;
}

void expect_result(const program& p, const built& r, const std::string& what) {
    auto got = p.eval(r.b.inputs);
    ASSERT_EQ(got.size(), 1u);
    const auto g = got[0].to_vector<double>();
    ASSERT_EQ(g.size(), r.want.size()) << what;
    for (std::size_t e = 0; e < g.size(); ++e)
        ASSERT_LE(std::fabs(g[e] - r.want[e]), r.tol[e]) << what << " element " << e << ": " << g[e] << " vs "
                                                         << r.want[e];
}

// The kernels packed_gemm should choose on this CPU with KILN_CPU_PACKED_GEMM_ISA = isa
// (a cap: "avx2" on a CPU without AVX2 is the baseline).
std::string expected_isa(const char* isa) {
    const std::string cap = isa ? isa : "";
    const bool avx2 = cpu::has_avx2_fma();
    const bool avx512 = cpu::has_avx512();
    if (cap == "generic" || !avx2) return "generic";
    if (cap == "avx2" || !avx512) return "avx2";
    return "avx512";
}

// Compiles with every fitting product packed, checks the op was used with the expected
// kernels and the result.
void check(const gemm_case& c, const char* isa = nullptr) {
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    test::env_override kernels("KILN_CPU_PACKED_GEMM_ISA", isa);
    auto r = build(c);
    auto p = compile_cpu(r.b);
    const auto* op = find_op(p);
    ASSERT_NE(op, nullptr) << describe(c) << "\n" << text(p);
    EXPECT_EQ(count_ops(p, "cpu::packed_gemm"), 1u);
    EXPECT_EQ(op->isa(), expected_isa(isa));
    EXPECT_TRUE(ref_kernels(p).empty()) << text(p);
    expect_result(p, r, describe(c) + " " + expected_isa(isa));
}

const std::vector<std::vector<step>> post_op_chains = {
    {step::bias, step::linear, step::add_full},
    {step::relu},
    {step::bias, step::clip},
    {step::add_col, step::relu},
    {step::sub_col},
    {step::mul_col},
    {step::max_col},
    {step::sub_full},
    {step::mul_full},
    {step::bias, step::mul_col, step::add_full, step::relu},
    {step::bias, step::gelu},
    {step::gelu2, step::add_full},
    {step::bias, step::hardswish},
    {step::hardswish, step::add_col},
};

}  // namespace

TEST(cpu_packed_gemm, shapes_with_bias) {
    for (std::size_t m : {1, 5, 6, 7, 12, 13, 25, 128, 197})
        for (std::size_t n : {1, 15, 16, 17, 33, 48, 1000})
            for (std::size_t k : {1, 3, 64, 1024}) check({{}, m, k, n, {step::bias}});
}

TEST(cpu_packed_gemm, shapes_on_the_avx2_kernels) {
    for (std::size_t m : {1, 7, 197})
        for (std::size_t n : {1, 17, 1000})
            for (std::size_t k : {3, 1024}) check({{}, m, k, n, {step::bias, step::relu}}, "avx2");
}

TEST(cpu_packed_gemm, shapes_on_the_baseline_kernels) {
    for (std::size_t m : {1, 7, 197})
        for (std::size_t n : {1, 17, 1000})
            for (std::size_t k : {3, 1024}) check({{}, m, k, n, {step::bias, step::relu}}, "generic");
}

TEST(cpu_packed_gemm, each_post_op_both_kernels) {
    for (const char* isa : {static_cast<const char*>(nullptr), "avx2", "generic"})
        for (const auto& chain : post_op_chains)
            for (std::size_t m : {7, 128}) {
                check({{}, m, 64, 17, chain}, isa);
                check({{}, m, 300, 256, chain}, isa);
            }
}

// GELU's erf in the epilogue is a polynomial: without fast_math the product with GELU is
// not a packed one (oneDNN's matmul takes the chain), and the result is exact to rounding.
TEST(cpu_packed_gemm, gelu_only_with_fast_math) {
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    auto r = build({{}, 40, 64, 48, {step::bias, step::gelu}});
    program p = r.b.p;
    compile_options exact;
    exact.fast_math = false;
    {
        test::env_override no_grouping("KILN_CPU_FUSION", "0");
        p.compile(*get_target("cpu"), exact);
    }
    EXPECT_EQ(count_ops(p, "cpu::packed_gemm"), 0u) << text(p);
    EXPECT_TRUE(ref_kernels(p).empty()) << text(p);
    expect_result(p, r, "fast_math off");
}

// The epilogue's GELU over its whole range (both erf branches, the cap, large values of
// either sign, NaN) on every kernel: C = A times a row of ones, A from -12 to 12.
TEST(cpu_packed_gemm, gelu_over_its_whole_range_on_every_kernel) {
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    const std::size_t m = 241, n = 19;
    std::vector<float> av(m);
    for (std::size_t i = 0; i < m; ++i) av[i] = -12.0f + 0.1f * static_cast<float>(i);
    av[7] = std::numeric_limits<float>::quiet_NaN();
    for (const char* isa : {static_cast<const char*>(nullptr), "avx2", "generic"}) {
        test::env_override kernels("KILN_CPU_PACKED_GEMM_ISA", isa);
        builder b;
        const shape as(type::float32, {m, 1});
        b.inputs["a"] = literal(as, av).get_argument();
        auto a = b.m->add_parameter("a", as);
        auto w = b.m->add_literal(literal(shape(type::float32, {1, n}), std::vector<float>(n, 1.0f)));
        auto y = b.op("matmul", {a, w});
        auto e = b.op("erf", {b.op("div", {y, b.scalar(1.4142135f)})});
        b.ret({b.op("mul", {b.op("mul", {y, b.op("add", {e, b.scalar(1.0f)})}), b.scalar(0.5f)})});
        auto p = compile_cpu(b);
        ASSERT_EQ(count_ops(p, "cpu::packed_gemm"), 1u) << text(p);
        ASSERT_NE(text(p).find("gelu_erf"), std::string::npos) << text(p);
        const auto got = p.eval(b.inputs).at(0).to_vector<float>();
        for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
                const double x = av[i], want = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
                const float g = got[i * n + j];
                if (std::isnan(av[i])) {
                    EXPECT_TRUE(std::isnan(g)) << expected_isa(isa);
                    continue;
                }
                EXPECT_NEAR(g, want, 1e-5 * std::fabs(want) + 2e-6) << expected_isa(isa) << " x " << x;
            }
    }
}

TEST(cpu_packed_gemm, batch_dims_folded_into_rows) {
    check({{2, 3}, 5, 40, 33, {step::bias, step::add_full, step::relu}});
    check({{4}, 197, 192, 576, {step::bias}});
    // B with a leading 1: the result gets it too.
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    builder b;
    auto y = b.op("matmul", {b.param("a", {20, 24}), b.constant({1, 24, 18})});
    b.ret({y});
    auto p = compile_cpu(b);
    EXPECT_EQ(count_ops(p, "cpu::packed_gemm"), 1u) << text(p);
    program ref = b.p;
    ref.compile(*get_target("ref"));
    expect_close(p.eval(b.inputs)[0], ref.eval(b.inputs)[0], 1e-5, 1e-5);
}

TEST(cpu_packed_gemm, gemm_transposed_b_alpha_and_c) {
    check({{}, 37, 50, 70, {step::bias, step::relu}, true});
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    for (float beta : {1.0f, 0.5f}) {
        builder b;
        auto a = b.param("a", {30, 20});
        auto w = b.constant({25, 20});
        auto cc = beta == 1.0f ? b.constant({25}) : b.constant({30, 25});
        value attrs = value::object{{"alpha", value(1.5f)}, {"beta", value(beta)}, {"trans_b", value(true)}};
        b.ret({b.op("gemm", attrs, {a, w, cc})});
        auto r = run_both(b, 1e-5, 1e-5);
        EXPECT_EQ(count_ops(r.cpu, "cpu::packed_gemm"), 1u) << text(r.cpu);
    }
}

TEST(cpu_packed_gemm, what_it_does_not_take_stays_on_onednn) {
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    auto expect_onednn = [](const builder& b) {
        program ref = b.p;
        ref.compile(*get_target("ref"));
        auto p = compile_cpu(b);
        EXPECT_EQ(count_ops(p, "cpu::packed_gemm"), 0u) << text(p);
        EXPECT_EQ(count_ops(p, "cpu::matmul"), 1u) << text(p);
        expect_close(p.eval(b.inputs)[0], ref.eval(b.inputs)[0], 1e-4, 1e-5);
    };
    {  // transposed A
        builder b;
        b.ret({b.op("gemm", value::object{{"trans_a", value(true)}}, {b.param("a", {20, 30}), b.constant({20, 24})})});
        expect_onednn(b);
    }
    {  // a post-op the kernels lack (sigmoid)
        builder b;
        b.ret({b.op("sigmoid", {b.op("matmul", {b.param("a", {30, 20}), b.constant({20, 24})})})});
        expect_onednn(b);
    }
    {  // a result written through a transpose (attention's heads back to rows)
        builder b;
        auto y = b.op("matmul", {b.param("a", {1, 4, 8, 16}), b.constant({16, 8})});
        auto t = b.op("transpose", {{"perm", {0, 2, 1, 3}}}, {y});
        b.ret({b.op("relu", {b.op("reshape", {{"dims", {1, 8, 32}}}, {t})})});
        expect_onednn(b);
    }
}

TEST(cpu_packed_gemm, switched_off_and_the_default_rule) {
    const gemm_case big{{}, 128, 256, 256, {step::bias}};
    {
        test::env_override off("KILN_CPU_PACKED_GEMM", "0");
        auto r = build(big);
        auto p = compile_cpu(r.b);
        EXPECT_EQ(count_ops(p, "cpu::packed_gemm"), 0u);
        expect_result(p, r, "off");
    }
    test::env_override unset("KILN_CPU_PACKED_GEMM", nullptr);
    if (!cpu::has_avx2_fma())
        GTEST_SKIP() << "without AVX2 the products stay on oneDNN by default";
    auto r = build(big);
    auto p = compile_cpu(r.b);
    EXPECT_EQ(count_ops(p, "cpu::packed_gemm"), 1u) << text(p);
    expect_result(p, r, "default");
    // One row: oneDNN's gemv on AVX2 machines, the packed kernels on AVX-512 ones.
    auto small = build({{}, 1, 2048, 1000, {step::bias}});
    auto sp = compile_cpu(small.b);
    EXPECT_EQ(count_ops(sp, "cpu::packed_gemm"), cpu::has_avx512() ? 1u : 0u);
    expect_result(sp, small, "one row, default");
}

TEST(cpu_packed_gemm, work_split_for_any_thread_count) {
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    for (std::size_t threads : {1, 2, 3, 4}) {
        compile_options opts;
        opts.threads = threads;
        for (const gemm_case& c : {gemm_case{{}, 197, 64, 40, {step::bias, step::add_full}},
                                   gemm_case{{}, 50, 64, 1000, {step::mul_col}}}) {
            auto r = build(c);
            program p = r.b.p;
            {
                test::env_override no_grouping("KILN_CPU_FUSION", "0");
                p.compile(*get_target("cpu"), opts);
            }
            EXPECT_EQ(count_ops(p, "cpu::packed_gemm"), 1u);
            expect_result(p, r, describe(c) + " threads " + std::to_string(threads));
        }
    }
}

TEST(cpu_packed_gemm, saved_program_loads_and_runs_with_either_kernels) {
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    auto r = build({{}, 29, 70, 45, {step::bias, step::add_full, step::relu}});
    auto p = compile_cpu(r.b);
    ASSERT_EQ(count_ops(p, "cpu::packed_gemm"), 1u);
    const auto bytes = save_buffer(p);
    for (const char* isa : {static_cast<const char*>(nullptr), "avx2", "generic"}) {
        test::env_override env("KILN_CPU_PACKED_GEMM_ISA", isa);
        auto loaded = load_buffer(bytes.data(), bytes.size());
        ASSERT_EQ(count_ops(loaded, "cpu::packed_gemm"), 1u);
        const auto* op = find_op(loaded);
        ASSERT_NE(op, nullptr);
        EXPECT_EQ(op->isa(), expected_isa(isa));
        expect_result(loaded, r, "loaded, " + expected_isa(isa));
    }
}

// K a multiple of 1024 (A's rows 4 KiB apart, in one L1 set): A is copied with padded rows
// into a planned buffer first (a_copy_stride); the result is the same, with each post-op
// kind (a full residual among the inputs before the copy's buffer), on every kernel, and
// after a save and load. Fewer rows, another K, or the switch: A is read in place.
TEST(cpu_packed_gemm, rows_4k_apart_are_copied_with_padding) {
    test::env_override all("KILN_CPU_PACKED_GEMM", "all");
    for (const char* isa : {static_cast<const char*>(nullptr), "avx2", "generic"}) {
        test::env_override kernels("KILN_CPU_PACKED_GEMM_ISA", isa);
        for (const gemm_case& c : {gemm_case{{}, 37, 1024, 70, {step::bias, step::add_full, step::relu}},
                                   gemm_case{{2}, 24, 2048, 33, {step::mul_col, step::sub_full}}}) {
            auto r = build(c);
            auto p = compile_cpu(r.b);
            const auto* op = find_op(p);
            ASSERT_NE(op, nullptr) << describe(c);
            EXPECT_EQ(op->a_copy_stride, static_cast<std::int64_t>(c.k + 16)) << describe(c);
            expect_result(p, r, describe(c) + " copied A");
            auto loaded = load_buffer(save_buffer(p).data(), save_buffer(p).size());
            ASSERT_NE(find_op(loaded), nullptr);
            EXPECT_EQ(find_op(loaded)->a_copy_stride, op->a_copy_stride);
            expect_result(loaded, r, describe(c) + " copied A, loaded");
        }
    }
    for (const gemm_case& c : {gemm_case{{}, 23, 1024, 40, {}}, gemm_case{{}, 64, 1000, 40, {}}}) {
        auto r = build(c);
        auto p = compile_cpu(r.b);
        ASSERT_NE(find_op(p), nullptr);
        EXPECT_EQ(find_op(p)->a_copy_stride, 0) << describe(c);
        expect_result(p, r, describe(c));
    }
    test::env_override off("KILN_CPU_PACKED_GEMM_COPY_A", "0");
    auto r = build({{}, 48, 1024, 40, {step::bias}});
    auto p = compile_cpu(r.b);
    ASSERT_NE(find_op(p), nullptr);
    EXPECT_EQ(find_op(p)->a_copy_stride, 0);
    expect_result(p, r, "switched off");
}

// A --bf16 program's product: on a CPU with AVX512-BF16 the bf16 kernels (B packed in bf16
// pairs, A converted per run: within bf16's rounding of A of the product of the bf16
// weights), and the saved program loads and runs where they are capped off, on the float32
// kernels over the widened panels (then exactly the product of the bf16 weights).
TEST(cpu_packed_gemm, bf16_program_on_the_bf16_kernels_and_without_them) {
    for (const gemm_case& c : {gemm_case{{}, 29, 71, 45, {step::bias, step::add_full, step::relu}},
                               gemm_case{{2}, 64, 1024, 40, {step::bias, step::gelu}}}) {
        auto r = build(c);
        quantize_bf16(r.b.p);
        // The expected product is of the bf16 weights: rebuild it from the program's literal.
        program p = r.b.p;
        compile_options opts;
        {
            test::env_override no_grouping("KILN_CPU_FUSION", "0");
            p.compile(*get_target("cpu"), opts);
        }
        const auto* op = find_op(p);
        ASSERT_NE(op, nullptr) << describe(c) << "\n" << text(p);
        const bool native = cpu::pgemm::has_bf16_kernels(cpu::isa_cap::none);
        EXPECT_EQ(op->bf16, native);
        EXPECT_EQ(op->isa(), native ? "avx512_bf16" : expected_isa(nullptr));
        program f32 = r.b.p;
        f32.compile(*get_target("ref"));  // ref rounds each op's result to bf16 too
        const auto want = f32.eval(r.b.inputs)[0];
        expect_close(p.eval(r.b.inputs)[0], want, 2e-2, 2e-2, describe(c) + " bf16");
        const auto bytes = save_buffer(p);
        for (const char* isa : {"avx2", "generic"}) {
            test::env_override env("KILN_CPU_PACKED_GEMM_ISA", isa);
            auto loaded = load_buffer(bytes.data(), bytes.size());
            const auto* lop = find_op(loaded);
            ASSERT_NE(lop, nullptr);
            EXPECT_EQ(lop->isa(), expected_isa(isa));
            expect_close(loaded.eval(r.b.inputs)[0], want, 2e-2, 2e-2, describe(c) + " loaded, " + isa);
        }
    }
}
