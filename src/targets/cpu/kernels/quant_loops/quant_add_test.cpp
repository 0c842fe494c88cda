// cpu::quant_add's AVX-512 loop against op::quant_add's ONNX float32 steps (what ref
// computes), element by element, for u8 and s8, tails of every length and a large tensor.
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/quant_loops/quant_add_avx512.hpp"

#include "ops/quant_fused.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

using namespace kiln;

namespace {

template <class T>
void check_against_steps(std::mt19937& rng, std::size_t n) {
    std::uniform_int_distribution<int> v(std::is_signed_v<T> ? -128 : 0, std::is_signed_v<T> ? 127 : 255);
    std::uniform_real_distribution<float> s(0.005f, 0.08f);
    op::quant_add p;
    p.a_scale = s(rng);
    p.b_scale = s(rng);
    p.y_scale = s(rng);
    p.a_zero_point = std::is_signed_v<T> ? v(rng) / 4 : v(rng);
    p.b_zero_point = std::is_signed_v<T> ? 0 : v(rng) / 2;
    p.y_zero_point = std::is_signed_v<T> ? -3 : 7;
    std::vector<T> a(n), b(n), y(n, T(0x5a));
    for (std::size_t i = 0; i < n; ++i) {
        a[i] = static_cast<T>(v(rng));
        b[i] = static_cast<T>(v(rng));
    }
    cpu::quant_add_avx512(p, a.data(), b.data(), y.data(), n);
    const float lo = std::is_signed_v<T> ? -128.0f : 0.0f, hi = std::is_signed_v<T> ? 127.0f : 255.0f;
    for (std::size_t i = 0; i < n; ++i) {
        const auto want = static_cast<T>(std::clamp(p.apply(float(a[i]), float(b[i])), lo, hi));
        ASSERT_EQ(int(y[i]), int(want)) << "n " << n << " at " << i << ": a " << int(a[i]) << " b " << int(b[i]);
    }
}

}  // namespace

TEST(cpu_quant_add, avx512_equals_the_onnx_steps) {
    if (!cpu::has_avx512()) GTEST_SKIP() << "no AVX-512 here (or KILN_CPU_MAX_ISA caps it)";
    std::mt19937 rng(41);
    for (std::size_t n : {1u, 15u, 16u, 17u, 63u, 64u, 65u, 100u, 1000u, 200003u}) {
        check_against_steps<std::uint8_t>(rng, n);
        check_against_steps<std::int8_t>(rng, n);
    }
}

// Every pair of 8-bit values under many scales: a fused multiply-add in place of ref's two
// roundings changes a level only where the sum lands within an ulp of a half level, which
// random tensors rarely reach; all 65536 pairs under 40 scale sets do.
TEST(cpu_quant_add, avx512_equals_the_onnx_steps_for_every_pair) {
    if (!cpu::has_avx512()) GTEST_SKIP() << "no AVX-512 here (or KILN_CPU_MAX_ISA caps it)";
    std::vector<std::uint8_t> a(65536), b(65536), y(65536);
    for (std::size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<std::uint8_t>(i & 0xFF);
        b[i] = static_cast<std::uint8_t>(i >> 8);
    }
    std::mt19937 rng(43);
    std::uniform_real_distribution<float> s(0.001f, 0.1f);
    std::uniform_int_distribution<int> z(0, 255);
    for (int set = 0; set < 40; ++set) {
        op::quant_add p;
        p.a_scale = s(rng);
        p.b_scale = s(rng);
        p.y_scale = s(rng);
        p.a_zero_point = z(rng);
        p.b_zero_point = z(rng);
        p.y_zero_point = z(rng);
        cpu::quant_add_avx512(p, a.data(), b.data(), y.data(), a.size());
        for (std::size_t i = 0; i < a.size(); ++i) {
            const auto want = static_cast<int>(std::clamp(p.apply(float(a[i]), float(b[i])), 0.0f, 255.0f));
            ASSERT_EQ(int(y[i]), want) << "set " << set << ": a " << int(a[i]) << " b " << int(b[i]);
        }
    }
}
