// Timing harness (not run by CI: DISABLED_): a float32 product with constant weights (the
// cpu target's own choice: oneDNN's gemv for one row on AVX2, packed_gemm otherwise) against
// the same product after quantize_int4_weights (cpu::int4_gemm), alternating the two run by
// run. The batch-1 shapes are the memory-bound case int4 is for. Run it with
//   build/bin/kiln_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*int4_gemm_bench*'
// (KILN_INT4_BENCH_RUNS sets the runs per program, default 200).
#include "cpu_test_util.hpp"

#include "targets/cpu/kernels/int4_gemm/int4_gemm.hpp"

#include <kiln/quantization.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace kiln;
using namespace kiln::cpu_test;

TEST(cpu_int4_gemm_bench, DISABLED_fp32_vs_int4) {
    const char* env_runs = std::getenv("KILN_INT4_BENCH_RUNS");
    const int runs = env_runs ? std::max(1, std::atoi(env_runs)) : 200;
    struct dims {
        std::size_t m, k, n;
    };
    // bert_small's layers, then LLM-sized projections (4096 x 4096 float32 is 64 MiB, past
    // this machine's 32 MiB L3; its int4 form, 10 MiB, is not).
    const std::vector<dims> shapes = {{1, 256, 256},   {1, 256, 1024},   {1, 1024, 1024}, {1, 4096, 4096},
                                      {1, 4096, 11008}, {4, 4096, 4096}, {16, 4096, 4096}, {128, 256, 1024}};
    std::printf("%-18s %10s %10s %10s %10s %8s\n", "m x k x n", "fp32 min", "fp32 med", "int4 min", "int4 med", "med x");
    for (const auto& s : shapes) {
        builder b;
        b.ret({b.op("matmul", {b.param("a", {s.m, s.k}), b.constant({s.k, s.n}, 0.05f)})});
        program f = b.p, q = b.p;
        quantize_int4_weights(q);
        f.compile(*get_target("cpu"));
        q.compile(*get_target("cpu"));
        ASSERT_EQ(count_ops(q, "cpu::int4_gemm"), 1u);
        auto time = [&](program& p) {
            const auto t0 = std::chrono::steady_clock::now();
            p.eval(b.inputs);
            return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        };
        for (int i = 0; i < 10; ++i) time(f), time(q);
        std::vector<double> tf, tq;
        for (int i = 0; i < runs; ++i) {
            tf.push_back(time(f));
            tq.push_back(time(q));
        }
        std::sort(tf.begin(), tf.end());
        std::sort(tq.begin(), tq.end());
        const double mf = tf[tf.size() / 2], mq = tq[tq.size() / 2];
        char name[64];
        std::snprintf(name, sizeof(name), "%zux%zux%zu", s.m, s.k, s.n);
        std::printf("%-18s %10.4f %10.4f %10.4f %10.4f %8.2f\n", name, tf.front(), mf, tq.front(), mq, mf / mq);
    }
}

// Where the unpacked tiles (run_int4_gemm's `wide`) start to pay over the register kernels:
// the same packed weights, both ways, alternating (the rule is int4_wide_rows).
TEST(cpu_int4_gemm_bench, DISABLED_register_vs_wide_rows) {
    const char* env_runs = std::getenv("KILN_INT4_BENCH_RUNS");
    const int runs = env_runs ? std::max(1, std::atoi(env_runs)) : 200;
    const auto kernels = cpu::int4_kernels_for(cpu::isa_cap::none);
    std::printf("%-18s %10s %10s %10s %10s  (%s)\n", "m x k x n", "reg min", "reg med", "wide min", "wide med",
                kernels.isa.c_str());
    for (std::size_t k : {1024, 4096})
        for (std::size_t m : {2, 4, 6, 8, 12, 16, 32}) {
            const std::size_t n = k;
            auto a = random_literal({m, k}).to_vector<float>();
            auto w = random_literal({k, n}).to_vector<float>();
            std::vector<std::uint8_t> b((k * n + 1) / 2);
            for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint8_t>(i * 37);
            std::vector<float> s((k / 32) * n, 0.01f);
            const auto packed = cpu::pack_int4_weights(b.data(), s.data(), nullptr, k, n, 32);
            std::vector<float> c(m * n);
            cpu::int4g::args g;
            g.m = m, g.n = n, g.k = k, g.block = 32;
            g.a = a.data(), g.b = packed.b.data(), g.so = packed.so.data(), g.c = c.data();
            auto time = [&](bool wide) {
                const auto t0 = std::chrono::steady_clock::now();
                cpu::run_int4_gemm(g, kernels, wide);
                return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            };
            std::vector<double> tr, tw;
            for (int i = 0; i < runs; ++i) {
                tr.push_back(time(false));
                tw.push_back(time(true));
            }
            std::sort(tr.begin(), tr.end());
            std::sort(tw.begin(), tw.end());
            char name[64];
            std::snprintf(name, sizeof(name), "%zux%zux%zu", m, k, n);
            std::printf("%-18s %10.4f %10.4f %10.4f %10.4f\n", name, tr.front(), tr[tr.size() / 2], tw.front(),
                        tw[tw.size() / 2]);
        }
}
