// Timing harness (not run by CI: DISABLED_): the own int8 kernels on one thread over
// MobileNetV2's layer shapes (1x1 as GEMMs, the depthwise 3x3s), best of N runs, in GMAC/s.
//   build/bin/kiln_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*int8_bench*'
#include "cpu_test_util.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/int8_gemm/int8_gemm.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>

using namespace kiln;
namespace i8g = kiln::cpu::i8g;

namespace {

// Random activations and weights: on constant ones every output is the same, and the
// requantize's fallback for quotients near a half-integer either never runs or always does.
template <class T>
std::vector<T> random_values(std::size_t n, int lo, int hi) {
    static std::mt19937 gen(7);
    std::uniform_int_distribution<int> d(lo, hi);
    std::vector<T> v(n);
    for (auto& x : v) x = static_cast<T>(d(gen));
    return v;
}

template <class F>
double best_ms(F f, int runs = 30) {
    double best = 1e30;
    for (int r = 0; r < runs; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    return best;
}

struct consts {
    std::vector<std::int32_t> comp;
    std::vector<float> scale;
    std::vector<double> d;
    i8g::requant q(std::size_t n) {
        comp.assign(i8g::padded(n), 100);
        scale.assign(2 * i8g::padded(n), 0.0001f);
        std::fill(scale.begin() + static_cast<std::ptrdiff_t>(i8g::padded(n)), scale.end(), 0.0001f * 20.0f);
        d.assign(3 * i8g::padded(n), 0.0);
        return cpu::int8_requant_view(comp.data(), scale.data(), d.data(), n, true, type::uint8, 0.05f, 3, 0, 255);
    }
};

}  // namespace

TEST(cpu_int8_bench, DISABLED_mobilenet_v2_shapes) {
    if (!cpu::has_avx2_fma()) GTEST_SKIP();
    struct g {
        std::size_t m, k, n;
    };
    for (auto s : {g{12544, 32, 32}, g{12544, 16, 96}, g{3136, 96, 24}, g{3136, 24, 144}, g{784, 144, 32},
                   g{196, 384, 64}, g{196, 64, 384}, g{49, 960, 160}, g{49, 320, 1280}}) {
        auto a = random_values<std::uint8_t>(s.m * s.k, 0, 255);
        std::vector<std::uint8_t> c(s.m * s.n);
        auto w = random_values<std::int8_t>(s.k * s.n, -127, 127);
        auto b = cpu::pack_int8_panels(w.data(), s.k, s.n, s.n, 1);
        consts k;
        i8g::gemm_args args;
        args.m = s.m, args.n = s.n, args.k = s.k, args.a = a.data(), args.lda = s.k, args.b = b.data(),
        args.c = c.data();
        args.ldc = s.n;
        args.q = k.q(s.n);
        auto fn = i8g::avx2_gemm();
        const double ms = best_ms([&] { fn(args, 0, s.m, 0, i8g::panels(s.n)); });
        std::printf("gemm %5zu x %4zu x %4zu: %.3f ms, %.1f GMAC/s\n", s.m, s.k, s.n, ms,
                    static_cast<double>(s.m * s.k * s.n) / ms * 1e-6);
    }
    struct dw {
        std::size_t h, c, stride;
    };
    for (auto s : {dw{112, 32, 1}, dw{112, 96, 2}, dw{56, 144, 1}, dw{28, 192, 1}, dw{14, 576, 1}, dw{7, 960, 1}}) {
        const std::size_t oh = s.stride == 1 ? s.h : s.h / 2;
        auto x = random_values<std::uint8_t>(s.h * s.h * s.c, 0, 255);
        std::vector<std::uint8_t> y(oh * oh * s.c);
        auto wt = random_values<std::int16_t>(i8g::dw_pairs * i8g::padded(s.c) * 2, -127, 127);
        for (std::size_t c = 0; c < s.c; ++c) wt[i8g::dw_weight_index(9, c, i8g::padded(s.c))] = 0;  // no tap 9
        consts k;
        i8g::dw_args d;
        d.batch = 1, d.h = d.w = s.h, d.c = s.c, d.oh = d.ow = oh, d.stride_h = d.stride_w = s.stride,
        d.pad_h = d.pad_w = 1;
        d.x = x.data(), d.x_zero = 5, d.wt = wt.data(), d.y = y.data();
        d.q = k.q(s.c);
        auto fn = i8g::avx2_depthwise();
        const double ms = best_ms([&] { fn(d, 0, oh); });
        std::printf("dw %3zu x %3zu /%zu: %.3f ms, %.2f GMAC/s\n", s.h, s.c, s.stride, ms,
                    static_cast<double>(oh * oh * s.c * 9) / ms * 1e-6);
    }
}
