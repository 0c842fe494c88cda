// fp8 on the cpu target: the rounding of fp8_round_trip against Kiln's own e4m3fn conversion
// (float_types, checked against the ONNX tables in float_types_onnx_test.cpp) on a sweep of
// float32 bit patterns, every e4m3fn value and every midpoint between neighbours (the ties);
// and a QuantizeLinear -> DequantizeLinear pair lowered to it, equal to ref bit for bit,
// with fp8 weights folded into float32 once.
#include "cpu_test_util.hpp"
#include "targets/cpu/kernels/fp8/fp8_round_trip.hpp"

#include <kiln/float_types.hpp>

#include <algorithm>
#include <cstring>
#include <set>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

float from_bits(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof(f));
    return f;
}

void expect_same(float v) {
    const float want = static_cast<float>(fp8e4m3fn(v, true));
    const float got = cpu::round_to_e4m3fn(v);
    if (std::isnan(want)) {
        ASSERT_TRUE(std::isnan(got)) << v;
    } else {
        std::uint32_t a, b;
        std::memcpy(&a, &want, 4);
        std::memcpy(&b, &got, 4);
        ASSERT_EQ(a, b) << v << ": " << got << " instead of " << want;
    }
}

}  // namespace

TEST(cpu_fp8, rounding_equals_the_e4m3fn_conversion) {
    for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 4093) expect_same(from_bits(static_cast<std::uint32_t>(b)));
    std::set<float> values;
    for (int code = 0; code < 256; ++code) {
        std::uint8_t byte = static_cast<std::uint8_t>(code);
        fp8e4m3fn f;
        std::memcpy(&f, &byte, 1);
        const float v = static_cast<float>(f);
        if (!std::isnan(v)) values.insert(v);
    }
    ASSERT_EQ(values.size(), 253u);  // 254 non-NaN codes, +0 and -0 equal
    float prev = *values.begin();
    for (float v : values) {
        expect_same(v);
        expect_same((prev + v) / 2);  // a tie: to the even neighbour
        expect_same(std::nextafter((prev + v) / 2, v));
        prev = v;
    }
    for (float v : {449.0f, 463.9f, 464.0f, 480.0f, 1e30f, INFINITY, -INFINITY, -0.0f, 1e-30f, -1e-30f, 0.0009765625f})
        expect_same(v);
}

TEST(cpu_fp8, quantize_dequantize_pair_lowered_and_equal_to_ref) {
    builder b;
    auto x = b.param("x", {4, 37}, 40.0f);  // past 448 / scale: saturates
    auto w = b.constant({37, 5});
    auto s = b.scalar(0.05f);
    auto q = b.op("quantize_linear", {{"output_type", static_cast<std::int64_t>(type::float8e4m3fn)}}, {x, s});
    auto d = b.op("dequantize_linear", {q, s});
    // fp8 weights: a DequantizeLinear of a float8 constant.
    auto wq = b.m->add_literal(literal(shape(type::float8e4m3fn, {37, 5}), w->get_literal().to_vector<float>()));
    auto wd = b.op("dequantize_linear", {wq, b.scalar(0.5f)});
    b.ret({b.op("matmul", {d, wd}), d});
    auto r = run_both(b, 1e-5, 1e-5);
    EXPECT_EQ(count_ops(r.cpu, "cpu::fp8_round_trip"), 1u) << text(r.cpu);
    EXPECT_EQ(r.cpu_out[1].to_vector<float>(), r.ref_out[1].to_vector<float>());
    EXPECT_TRUE(ref_kernels(r.cpu).empty()) << text(r.cpu);
}
