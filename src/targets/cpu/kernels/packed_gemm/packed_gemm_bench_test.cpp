// Timing harness (not run by CI: DISABLED_): oneDNN's matmul against cpu::packed_gemm for
// the linear layers of bert_small and vit_tiny and CNN classifier heads, each product with
// its bias (and a residual add where the model has one), alternating the two programs run
// by run. Run it with
//   build/bin/kiln_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*packed_gemm_bench*'
// (KILN_PACKED_GEMM_BENCH_RUNS sets the runs per program, default 300).
#include "cpu_test_util.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

struct bench_shape {
    std::size_t m, k, n;
    bool residual;
};

program compile_with(const builder& b, const char* mode) {
    test::env_override sw("KILN_CPU_PACKED_GEMM", mode);
    test::env_override no_grouping("KILN_CPU_FUSION", "0");
    program p = b.p;
    p.compile(*get_target("cpu"));
    return p;
}

struct stats {
    double min, median;
};

stats summarize(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return {v.front(), v[v.size() / 2]};
}

}  // namespace

TEST(cpu_packed_gemm_bench, DISABLED_onednn_vs_packed) {
    const char* env_runs = std::getenv("KILN_PACKED_GEMM_BENCH_RUNS");
    const int runs = env_runs ? std::max(1, std::atoi(env_runs)) : 300;
    const std::vector<bench_shape> shapes = {
        {128, 256, 256, false}, {128, 256, 1024, false}, {128, 1024, 256, true},  // bert_small
        {197, 192, 576, false}, {197, 192, 768, false},  {197, 768, 192, true},
        {197, 192, 192, true},                                                    // vit_tiny
        {1, 2048, 1000, false}, {1, 1280, 1000, false},                           // CNN heads
        {4, 256, 256, false},   {8, 256, 256, false},    {16, 256, 256, false},
        {32, 256, 256, false},  {64, 256, 256, false},   {2, 256, 256, false},
        {2, 2048, 1000, false}, {39, 27, 17, false},     {13, 9, 7, false},
        {16, 64, 64, false},
    };
    std::printf("%-16s %-9s %10s %10s %10s %10s %8s\n", "m x k x n", "residual", "dnnl min", "dnnl med",
                "packed min", "packed med", "med x");
    for (const auto& s : shapes) {
        builder b;
        auto y = b.op("add", {b.op("matmul", {b.param("a", {s.m, s.k}), b.constant({s.k, s.n}, 0.05f)}),
                              b.constant({s.n})});
        if (s.residual) y = b.op("add", {y, b.param("r", {s.m, s.n})});
        b.ret({y});
        program dnnl = compile_with(b, "0");
        program packed = compile_with(b, "all");
        ASSERT_EQ(count_ops(dnnl, "cpu::packed_gemm"), 0u);
        ASSERT_EQ(count_ops(packed, "cpu::packed_gemm"), 1u) << text(packed);
        std::vector<double> td, tp;
        for (int i = 0; i < 20; ++i) {
            dnnl.eval(b.inputs);
            packed.eval(b.inputs);
        }
        auto time = [&](program& p) {
            const auto t0 = std::chrono::steady_clock::now();
            p.eval(b.inputs);
            return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        };
        for (int i = 0; i < runs; ++i) {
            td.push_back(time(dnnl));
            tp.push_back(time(packed));
        }
        const auto d = summarize(td), p = summarize(tp);
        const std::string name = std::to_string(s.m) + "x" + std::to_string(s.k) + "x" + std::to_string(s.n);
        std::printf("%-16s %-9s %10.4f %10.4f %10.4f %10.4f %8.2f\n", name.c_str(), s.residual ? "yes" : "no", d.min,
                    d.median, p.min, p.median, d.median / p.median);
        std::fflush(stdout);
    }
}
