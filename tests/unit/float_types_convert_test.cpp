// float8e8m0 (exponent-only, with round modes) and kiln::convert<>() between the
// element types, checked against values worked out here from the ONNX definitions.
#include <kiln/types.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace {

using kiln::e8m0_round;
using kiln::fp8e8m0;
using kiln::to_fp8e8m0;

std::uint8_t e8m0(double x, bool sat, e8m0_round mode) { return to_fp8e8m0(x, sat, mode).bits; }

TEST(float_types_e8m0, decode_every_pattern) {
    for (int b = 0; b < 256; ++b) {
        const float got = fp8e8m0::from_bits(static_cast<std::uint8_t>(b));
        if (b == 255) {
            EXPECT_TRUE(std::isnan(got));
        } else {
            EXPECT_EQ(got, std::ldexp(1.0f, b - 127)) << b;  // 2^-127 is a float subnormal
        }
    }
}

TEST(float_types_e8m0, every_value_encodes_to_itself_in_every_mode) {
    for (int b = 0; b < 255; ++b) {
        const float v = fp8e8m0::from_bits(static_cast<std::uint8_t>(b));
        for (bool sat : {true, false}) {
            for (auto mode : {e8m0_round::up, e8m0_round::down, e8m0_round::nearest}) {
                ASSERT_EQ(to_fp8e8m0(v, sat, mode).bits, b);
                ASSERT_EQ(to_fp8e8m0(static_cast<double>(v), sat, mode).bits, b);
                ASSERT_EQ(to_fp8e8m0(-v, sat, mode).bits, b);  // sign ignored
            }
        }
    }
}

TEST(float_types_e8m0, round_modes) {
    const auto up = e8m0_round::up, down = e8m0_round::down, nearest = e8m0_round::nearest;
    // 3 = 1.5 * 2: the tie of nearest goes up.
    EXPECT_EQ(e8m0(3.0, true, up), 129);
    EXPECT_EQ(e8m0(3.0, true, down), 128);
    EXPECT_EQ(e8m0(3.0, true, nearest), 129);
    EXPECT_EQ(e8m0(2.99, true, nearest), 128);
    EXPECT_EQ(e8m0(5.0, true, up), 130);
    EXPECT_EQ(e8m0(5.0, true, down), 129);
    EXPECT_EQ(e8m0(5.0, true, nearest), 129);
    EXPECT_EQ(e8m0(0.124, true, up), 124);  // the ONNX conformance inputs
    EXPECT_EQ(e8m0(1.1, true, up), 128);
    // Specials and range ends (ONNX Cast table for float8e8m0).
    for (auto mode : {up, down, nearest}) {
        EXPECT_EQ(e8m0(NAN, true, mode), 255);
        EXPECT_EQ(e8m0(NAN, false, mode), 255);
        EXPECT_EQ(e8m0(INFINITY, true, mode), 254);
        EXPECT_EQ(e8m0(INFINITY, false, mode), 255);
        EXPECT_EQ(e8m0(0.0, true, mode), 0);
        EXPECT_EQ(e8m0(0.0, false, mode), 255);
        EXPECT_EQ(e8m0(0x1p200, true, mode), 254);
        EXPECT_EQ(e8m0(0x1p200, false, mode), 255);
        EXPECT_EQ(e8m0(0x1p127, false, mode), 254);
    }
    EXPECT_EQ(e8m0(0x1.2p127, false, up), 255);  // rounds past 2^127
    EXPECT_EQ(e8m0(0x1.2p127, true, up), 254);
    EXPECT_EQ(e8m0(0x1.2p127, false, down), 254);
    EXPECT_EQ(e8m0(0x1.2p127, false, nearest), 254);
    EXPECT_EQ(e8m0(0x1.8p127, false, nearest), 255);
    // Below 2^-127: rounding up lands on 2^-127; down/nearest underflow.
    EXPECT_EQ(e8m0(0x1p-130, false, up), 0);
    EXPECT_EQ(e8m0(5e-324, false, up), 0);
    EXPECT_EQ(e8m0(0x1p-130, false, down), 255);
    EXPECT_EQ(e8m0(0x1p-130, true, down), 0);
    EXPECT_EQ(e8m0(0x1.8p-128, false, nearest), 0);  // tie between 2^-128 and 2^-127 -> up
    EXPECT_EQ(e8m0(0x1.7p-128, false, nearest), 255);
    EXPECT_EQ(e8m0(0x1.000002p-127, false, up), 1);  // float subnormal just above 2^-127
    // The float constructor uses the ONNX defaults: round up, saturate unless told.
    EXPECT_EQ(fp8e8m0(3.0f).bits, 129);
    EXPECT_EQ(fp8e8m0(0.0f).bits, 0);
    EXPECT_EQ(fp8e8m0(0.0f, false).bits, 255);
    EXPECT_EQ(fp8e8m0(-4.0).bits, 129);
}

// Random positive floats against frexp-based rounding of the exact value.
TEST(float_types_e8m0, random_values_match_frexp) {
    std::mt19937 rng(3);
    for (int i = 0; i < 20000; ++i) {
        const float x = std::bit_cast<float>(static_cast<std::uint32_t>(rng()) & 0x7FFF'FFFFu);
        if (!std::isfinite(x) || x == 0) continue;
        int e = 0;
        const double m = std::frexp(static_cast<double>(x), &e);  // x = m * 2^e, m in [0.5, 1)
        const int k = e - 1;                                     // x = 2m * 2^k, 2m in [1, 2)
        const bool exact = m == 0.5;
        const int want_up = exact ? k : k + 1, want_down = k, want_nearest = 2 * m >= 1.5 ? k + 1 : k;
        auto expect = [&](int r, e8m0_round mode) {
            int b = r + 127;
            if (b > 254) b = 255;
            if (b < 0) b = mode == e8m0_round::up ? 0 : 255;
            EXPECT_EQ(e8m0(x, false, mode), b) << x;
        };
        expect(want_up, e8m0_round::up);
        expect(want_down, e8m0_round::down);
        expect(want_nearest, e8m0_round::nearest);
    }
}

TEST(float_types_convert, float_to_int_is_defined_everywhere) {
    using kiln::convert;
    EXPECT_EQ(convert<std::int32_t>(NAN), 0);
    EXPECT_EQ(convert<std::int64_t>(-NAN), 0);
    EXPECT_EQ(convert<std::uint8_t>(kiln::half(NAN)), 0);
    EXPECT_EQ(convert<std::int32_t>(INFINITY), std::numeric_limits<std::int32_t>::max());
    EXPECT_EQ(convert<std::int32_t>(-INFINITY), std::numeric_limits<std::int32_t>::min());
    EXPECT_EQ(convert<std::int64_t>(1e30), std::numeric_limits<std::int64_t>::max());
    EXPECT_EQ(convert<std::uint64_t>(-5.0), 0u);
    EXPECT_EQ(convert<std::uint8_t>(300.0f), 255);
    EXPECT_EQ(convert<std::int32_t>(2.7f), 2);  // wider ints truncate toward zero
    EXPECT_EQ(convert<std::int32_t>(-2.7), -2);
    EXPECT_EQ(convert<std::int8_t>(kiln::fp8e4m3fn(-3.5f)), -3);
    EXPECT_EQ(convert<std::int16_t>(kiln::fp8e5m2fnuz::from_bits(0x80)), 0);  // NaN
}

TEST(float_types_convert, to_and_from_bool) {
    using kiln::convert;
    EXPECT_TRUE(convert<bool>(NAN));  // ONNX: only +-0 is false
    EXPECT_FALSE(convert<bool>(-0.0f));
    EXPECT_TRUE(convert<bool>(1e-40f));
    EXPECT_FALSE(convert<bool>(kiln::half::from_bits(0x8000)));
    EXPECT_TRUE(convert<bool>(kiln::fp8e4m3fnuz::from_bits(0x80)));  // NaN
    EXPECT_FALSE(convert<bool>(kiln::int4(16)));
    EXPECT_TRUE(convert<bool>(std::int64_t{-7}));
    EXPECT_EQ(convert<kiln::half>(true).bits, 0x3C00);
    EXPECT_EQ(convert<kiln::fp8e4m3fn>(true).bits, 0x38);
    EXPECT_EQ(convert<kiln::fp4e2m1>(true).bits, 0x2);
    EXPECT_EQ(convert<kiln::int4>(true), 1);
    EXPECT_EQ(convert<float>(false), 0.0f);
}

TEST(float_types_convert, integers_to_small_floats_round_once) {
    using kiln::convert;
    EXPECT_EQ(convert<kiln::half>(std::int32_t{65504}).bits, 0x7BFF);
    EXPECT_EQ(convert<kiln::half>(std::int32_t{65520}).bits, 0x7C00);
    EXPECT_EQ(convert<kiln::half>(std::int32_t{2049}).bits, 0x6800);  // tie -> 2048
    EXPECT_EQ(convert<kiln::half>(std::int32_t{2051}).bits, 0x6802);  // tie -> 2052
    EXPECT_EQ(convert<kiln::half>(std::int64_t{-70000}).bits, 0xFC00);
    // 2^24 + 2^16 + 1 is just above a bf16 midpoint; via float it would become the
    // midpoint and round down to even.
    EXPECT_EQ(convert<kiln::bfloat16>(std::int32_t{(1 << 24) + (1 << 16) + 1}).bits,
              kiln::bfloat16(static_cast<double>((1 << 24) + (1 << 17))).bits);
    // Likewise past 2^53, where even double is not exact.
    const std::int64_t big = (std::int64_t{1} << 60) + (std::int64_t{1} << 52) + 1;
    EXPECT_EQ(convert<kiln::bfloat16>(big).bits, kiln::bfloat16(0x1.02p60).bits);
    EXPECT_EQ(convert<kiln::bfloat16>(-big).bits, kiln::bfloat16(-0x1.02p60).bits);
    EXPECT_EQ(convert<kiln::fp8e4m3fn>(std::uint64_t{(1ull << 63) + 1}).bits, 0x7E);  // saturates
    EXPECT_EQ(convert<kiln::bfloat16>(std::numeric_limits<std::uint64_t>::max()).bits, 0x5F80);  // 2^64
    EXPECT_EQ(convert<kiln::bfloat16>(std::numeric_limits<std::int64_t>::min()).bits, 0xDF00);  // -2^63
    EXPECT_EQ(convert<kiln::fp8e8m0>(std::int32_t{5}).bits, 130);  // up
    EXPECT_EQ(convert<kiln::fp4e2m1>(std::int32_t{-100}).bits, 0xF);
}

TEST(float_types_convert, sub_byte_integers_round_even_then_wrap) {
    using kiln::convert;
    EXPECT_EQ(convert<kiln::int4>(2.5f), 2);
    EXPECT_EQ(convert<kiln::int4>(3.5f), 4);
    EXPECT_EQ(convert<kiln::int4>(-2.5), -2);
    EXPECT_EQ(convert<kiln::int4>(-2.51), -3);
    EXPECT_EQ(convert<kiln::int4>(7.5f), -8);  // 8 wraps
    EXPECT_EQ(convert<kiln::int4>(-9.0f), 7);  // the ONNX conformance values
    EXPECT_EQ(convert<kiln::int4>(15.0f), -1);
    EXPECT_EQ(convert<kiln::uint4>(-1.0f), 15);
    EXPECT_EQ(convert<kiln::uint4>(16.0f), 0);
    EXPECT_EQ(convert<kiln::uint4>(0.5f), 0);
    EXPECT_EQ(convert<kiln::uint4>(1.5f), 2);
    EXPECT_EQ(convert<kiln::uint4>(1e30f), 0);  // multiple of 16
    EXPECT_EQ(convert<kiln::uint4>(kiln::half(17.0f)), 1);
    EXPECT_EQ(convert<kiln::int4>(NAN), 0);
    EXPECT_EQ(convert<kiln::int4>(-INFINITY), 0);
    EXPECT_EQ(convert<kiln::int2>(2.0f), -2);
    EXPECT_EQ(convert<kiln::int2>(3.0f), -1);
    EXPECT_EQ(convert<kiln::uint2>(-3.0f), 1);
    EXPECT_EQ(convert<kiln::uint2>(5.5f), 2);  // 6 -> 2
    EXPECT_EQ(convert<kiln::int4>(std::int32_t{200}), -8);  // integers wrap
    EXPECT_EQ(convert<kiln::uint2>(std::uint64_t{7}), 3);
    EXPECT_EQ(convert<std::int8_t>(kiln::int4(-8)), -8);
    EXPECT_EQ(convert<float>(kiln::uint4(15)), 15.0f);
}

TEST(float_types_convert, between_small_floats_goes_through_float_exactly) {
    using kiln::convert;
    for (int b = 0; b < 256; ++b) {
        const auto e5 = kiln::fp8e5m2::from_bits(static_cast<std::uint8_t>(b));
        // e5m2 is the top byte of fp16.
        EXPECT_EQ(convert<kiln::half>(e5).bits, (b & 0x7F) > 0x7C ? ((b << 8) | 0x200) : b << 8) << b;
        const auto e4 = kiln::fp8e4m3fn::from_bits(static_cast<std::uint8_t>(b));
        if ((b & 0x7F) != 0x7F) {
            EXPECT_EQ(static_cast<float>(convert<kiln::half>(e4)), static_cast<float>(e4)) << b;
        }
    }
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const auto x = kiln::half::from_bits(static_cast<std::uint16_t>(h));
        ASSERT_EQ(convert<kiln::fp8e4m3fn>(x).bits, kiln::fp8e4m3fn(static_cast<float>(x)).bits);
        ASSERT_EQ(convert<kiln::bfloat16>(x).bits, kiln::bfloat16(static_cast<float>(x)).bits);
    }
}

}  // namespace
