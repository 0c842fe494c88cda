// Exhaustive checks of the binary small float formats (fp16, bf16, fp8 x4, fp4) against
// references computed here from the format definitions (sign/exponent/mantissa math with
// ldexp, and nearest-value search over the decoded values), not from the codec.
#include <kiln/float_types.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

enum class kind { ieee, fn, fnuz, none };

// A format as the ONNX docs define it, plus the results its Cast table prescribes for
// specials (+inf, -inf with saturate on/off; +NaN, -NaN).
struct format {
    std::string name;
    int exp_bits, mant_bits, bias;
    kind k;
    bool has_saturate;  // fp8: the `saturate` attribute applies
    std::uint32_t pinf_sat, pinf_nosat, ninf_sat, ninf_nosat, pnan, nnan;
    std::function<std::uint32_t(float, bool)> enc_f;
    std::function<std::uint32_t(double, bool)> enc_d;
    std::function<float(std::uint32_t)> dec;

    int width() const { return exp_bits + mant_bits; }
    std::uint32_t sign() const { return 1u << width(); }
    std::uint32_t count() const { return 2u << width(); }
    bool is_nan_pattern(std::uint32_t b) const {
        const std::uint32_t exp = (b >> mant_bits) & ((1u << exp_bits) - 1);
        const std::uint32_t man = b & ((1u << mant_bits) - 1);
        switch (k) {
        case kind::ieee: return exp == (1u << exp_bits) - 1 && man != 0;
        case kind::fn: return (b & (sign() - 1)) == sign() - 1;
        case kind::fnuz: return b == sign();
        case kind::none: return false;
        }
        return false;
    }
    bool is_inf_pattern(std::uint32_t b) const {
        return k == kind::ieee && (b & (sign() - 1)) == ((1u << exp_bits) - 1) << mant_bits;
    }
    // The value of a non-NaN pattern, from the definition.
    double value(std::uint32_t b) const {
        const bool neg = (b & sign()) != 0;
        if (is_inf_pattern(b)) return neg ? -INFINITY : INFINITY;
        const int exp = static_cast<int>((b >> mant_bits) & ((1u << exp_bits) - 1));
        const int man = static_cast<int>(b & ((1u << mant_bits) - 1));
        const double v = exp == 0 ? std::ldexp(man, 1 - bias - mant_bits)
                                  : std::ldexp((1 << mant_bits) + man, exp - bias - mant_bits);
        return neg ? -v : v;
    }
};

template <class T>
format make(std::string name, int e, int m, int bias, kind k, bool sat, std::vector<std::uint32_t> specials) {
    return format{std::move(name), e, m, bias, k, sat,
                  specials[0], specials[1], specials[2], specials[3], specials[4], specials[5],
                  [](float f, bool s) -> std::uint32_t {
                      if constexpr (std::is_constructible_v<T, float, bool>) return T(f, s).bits;
                      else return T(f).bits;
                  },
                  [](double d, bool s) -> std::uint32_t {
                      if constexpr (std::is_constructible_v<T, double, bool>) return T(d, s).bits;
                      else return T(d).bits;
                  },
                  [](std::uint32_t b) { return static_cast<float>(T::from_bits(static_cast<decltype(T::bits)>(b))); }};
}

const std::vector<format>& formats() {
    static const std::vector<format> all = {
        make<kiln::half>("fp16", 5, 10, 15, kind::ieee, false, {0x7C00, 0x7C00, 0xFC00, 0xFC00, 0x7E00, 0xFE00}),
        make<kiln::bfloat16>("bf16", 8, 7, 127, kind::ieee, false, {0x7F80, 0x7F80, 0xFF80, 0xFF80, 0x7FC0, 0xFFC0}),
        make<kiln::fp8e4m3fn>("e4m3fn", 4, 3, 7, kind::fn, true, {0x7E, 0x7F, 0xFE, 0xFF, 0x7F, 0xFF}),
        make<kiln::fp8e4m3fnuz>("e4m3fnuz", 4, 3, 8, kind::fnuz, true, {0x7F, 0x80, 0xFF, 0x80, 0x80, 0x80}),
        make<kiln::fp8e5m2>("e5m2", 5, 2, 15, kind::ieee, true, {0x7B, 0x7C, 0xFB, 0xFC, 0x7E, 0xFE}),
        make<kiln::fp8e5m2fnuz>("e5m2fnuz", 5, 2, 16, kind::fnuz, true, {0x7F, 0x80, 0xFF, 0x80, 0x80, 0x80}),
        // fp4 always saturates; NaN -> 0x8 as in the ONNX conformance data (see float_codec.hpp).
        make<kiln::fp4e2m1>("e2m1", 2, 1, 1, kind::none, false, {0x7, 0x7, 0xF, 0xF, 0x8, 0x8}),
    };
    return all;
}

std::uint32_t fbits(float f) { return std::bit_cast<std::uint32_t>(f); }

// Finite non-negative values in increasing order, with their patterns, plus one virtual
// step past the largest finite value (what the next pattern would be worth if the
// format went on); rounding onto it means overflow.
struct ladder {
    std::vector<double> values;
    std::vector<std::uint32_t> bits;  // bits.back() is the virtual step: max + 1
};
ladder positive_ladder(const format& f) {
    ladder l;
    for (std::uint32_t b = 0; b < f.sign(); ++b)
        if (!f.is_nan_pattern(b) && !f.is_inf_pattern(b)) l.values.push_back(f.value(b)), l.bits.push_back(b);
    const std::uint32_t max = l.bits.back();
    const int exp = static_cast<int>(max >> f.mant_bits);
    l.values.push_back(l.values.back() + std::ldexp(1.0, exp - f.bias - f.mant_bits));
    l.bits.push_back(max + 1);
    return l;
}

// The pattern for a rung of the ladder with the sign of the input: the virtual step
// becomes the Cast table's overflow result, and fnuz has no negative zero.
std::uint32_t finish(const format& f, const ladder& l, std::uint32_t r, bool neg, bool saturate) {
    if (r == l.bits.back()) {
        const bool sat = f.has_saturate ? saturate : f.k == kind::none;
        return neg ? (sat ? f.ninf_sat : f.ninf_nosat) : (sat ? f.pinf_sat : f.pinf_nosat);
    }
    if (neg && !(r == 0 && f.k == kind::fnuz)) r |= f.sign();
    return r;
}

// The expected encoding of a non-NaN x by nearest-value search, ties to even.
std::uint32_t oracle(const format& f, const ladder& l, double x, bool saturate) {
    const double a = std::fabs(x);
    std::uint32_t r = l.bits.back();
    if (a < l.values.back()) {
        const auto hi = static_cast<std::size_t>(std::upper_bound(l.values.begin(), l.values.end(), a) - l.values.begin());
        const std::size_t lo = hi - 1;
        const double dlo = a - l.values[lo], dhi = l.values[hi] - a;  // exact near a tie (Sterbenz)
        r = dlo < dhi ? l.bits[lo] : dhi < dlo ? l.bits[hi] : (l.bits[lo] & 1) == 0 ? l.bits[lo] : l.bits[hi];
    }
    return finish(f, l, r, std::signbit(x), saturate);
}

TEST(float_types, decode_every_pattern_matches_the_definition) {
    for (const auto& f : formats()) {
        for (std::uint32_t b = 0; b < f.count(); ++b) {
            const float got = f.dec(b);
            if (f.is_nan_pattern(b)) {
                EXPECT_TRUE(std::isnan(got)) << f.name << " " << b;
                EXPECT_EQ(std::signbit(got), (b & f.sign()) != 0) << f.name << " " << b;
                continue;
            }
            const double want = f.value(b);
            ASSERT_EQ(static_cast<double>(static_cast<float>(want)), want) << f.name;  // representable
            EXPECT_EQ(fbits(got), fbits(static_cast<float>(want))) << f.name << " pattern " << b;
        }
    }
}

TEST(float_types, fp16_decode_agrees_with_compiler_float16) {
    for (std::uint32_t b = 0; b < 0x10000; ++b) {
        const auto h = std::bit_cast<_Float16>(static_cast<std::uint16_t>(b));
        const float want = static_cast<float>(h);
        const float got = kiln::half::from_bits(static_cast<std::uint16_t>(b));
        if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got));
        }
        else EXPECT_EQ(fbits(got), fbits(want)) << b;
    }
}

TEST(float_types, encode_of_decode_is_identity) {
    for (const auto& f : formats()) {
        for (std::uint32_t b = 0; b < f.count(); ++b) {
            const float v = f.dec(b);
            for (bool sat : {true, false}) {
                const std::uint32_t back_f = f.enc_f(v, sat), back_d = f.enc_d(v, sat);
                if (f.is_inf_pattern(b)) {  // e5m2 with saturate turns inf into max
                    const bool neg = (b & f.sign()) != 0, s = f.has_saturate && sat;
                    ASSERT_EQ(back_f, neg ? (s ? f.ninf_sat : f.ninf_nosat) : (s ? f.pinf_sat : f.pinf_nosat));
                    ASSERT_EQ(back_d, back_f);
                } else if (!f.is_nan_pattern(b)) {
                    ASSERT_EQ(back_f, b) << f.name << " sat=" << sat;
                    ASSERT_EQ(back_d, b) << f.name << " sat=" << sat;
                } else {
                    // NaN stays NaN; ieee quiet NaNs keep sign and payload, signaling ones
                    // come back quieted.
                    EXPECT_TRUE(f.is_nan_pattern(back_f)) << f.name << " " << b;
                    EXPECT_EQ(back_f, back_d);
                    if (f.k == kind::ieee) {
                        EXPECT_EQ(back_f, b | (1u << (f.mant_bits - 1))) << f.name << " " << b;
                    }
                }
            }
        }
    }
}

// Every midpoint between neighbours (ties go to the even mantissa, or overflow when
// that is the virtual step past the max), and the values just either side of it,
// through both the float and the double entry points. Just above a midpoint, a double
// that rounds to the midpoint as a float must still round up: no double rounding.
TEST(float_types, ties_round_to_even_and_neighbours_round_to_nearest) {
    for (const auto& f : formats()) {
        const ladder l = positive_ladder(f);
        int double_rounding_cases = 0;
        for (std::size_t i = 0; i + 1 < l.values.size(); ++i) {
            const double mid = (l.values[i] + l.values[i + 1]) / 2;
            ASSERT_EQ(static_cast<double>(static_cast<float>(mid)), mid);
            const std::uint32_t lo = l.bits[i], hi = l.bits[i + 1], even = (lo & 1) == 0 ? lo : hi;
            for (bool sat : {true, false}) {
                if (!sat && !f.has_saturate) continue;  // the flag does not apply
                for (bool neg : {false, true}) {
                    const double x = neg ? -mid : mid;
                    const double up = std::nextafter(x, neg ? -INFINITY : INFINITY), down = std::nextafter(x, 0.0);
                    ASSERT_EQ(f.enc_d(x, sat), finish(f, l, even, neg, sat)) << f.name << " tie " << x;
                    ASSERT_EQ(f.enc_d(up, sat), finish(f, l, hi, neg, sat)) << f.name << " above " << x;
                    ASSERT_EQ(f.enc_d(down, sat), finish(f, l, lo, neg, sat)) << f.name << " below " << x;
                    const auto xf = static_cast<float>(x);
                    const float upf = std::nextafter(xf, neg ? -INFINITY : INFINITY), downf = std::nextafter(xf, 0.0f);
                    ASSERT_EQ(f.enc_f(xf, sat), finish(f, l, even, neg, sat)) << f.name << " tie " << x;
                    ASSERT_EQ(f.enc_f(upf, sat), finish(f, l, hi, neg, sat)) << f.name << " above " << x;
                    ASSERT_EQ(f.enc_f(downf, sat), finish(f, l, lo, neg, sat)) << f.name << " below " << x;
                    if (static_cast<float>(up) == xf && even != hi) ++double_rounding_cases;
                }
            }
        }
        EXPECT_GT(double_rounding_cases, 0) << f.name;
    }
}

TEST(float_types, random_inputs_match_nearest_value_search) {
    std::mt19937_64 rng(20240611);
    for (const auto& f : formats()) {
        const ladder l = positive_ladder(f);
        const double min_sub = l.values[1], max = l.values.back();
        std::uniform_real_distribution<double> log2_range(std::log2(min_sub) - 3, std::log2(max) + 2);
        for (int i = 0; i < 8000; ++i) {
            const bool sat = (i & 1) != 0;
            // Any float bit pattern (NaNs excluded) ...
            const float any = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
            if (!std::isnan(any)) {
                ASSERT_EQ(f.enc_f(any, sat), oracle(f, l, any, sat)) << f.name << " " << any;
            }
            // ... and values spread over the format's range, as float and as a full double.
            const double d = std::ldexp(1.0 + static_cast<double>(rng() >> 12) * 0x1p-52, static_cast<int>(std::floor(log2_range(rng))))
                             * ((rng() & 1) != 0 ? -1 : 1);
            ASSERT_EQ(f.enc_d(d, sat), oracle(f, l, d, sat)) << f.name << " " << d;
            const float df = static_cast<float>(d);
            ASSERT_EQ(f.enc_f(df, sat), oracle(f, l, df, sat)) << f.name << " " << df;
        }
    }
}

TEST(float_types, fp16_encode_agrees_with_compiler_float16) {
    std::mt19937_64 rng(7);
    for (int i = 0; i < 40000; ++i) {
        const float f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
        // A full 53-bit significand anywhere from below the subnormals to past the max.
        const double d = std::ldexp(1.0 + static_cast<double>(rng() >> 12) * 0x1p-52, static_cast<int>(rng() % 46) - 28)
                         * ((rng() & 1) != 0 ? -1 : 1);
        if (!std::isnan(f)) {
            ASSERT_EQ(kiln::half(f).bits, std::bit_cast<std::uint16_t>(static_cast<_Float16>(f))) << f;
        }
        ASSERT_EQ(kiln::half(d).bits, std::bit_cast<std::uint16_t>(static_cast<_Float16>(d))) << d;
    }
}

// bf16 is the top half of a float: RNE is "add 0x7FFF plus the kept LSB, then shift".
TEST(float_types, bf16_encode_agrees_with_integer_rounding) {
    std::mt19937_64 rng(11);
    for (int i = 0; i < 100000; ++i) {
        const auto u = static_cast<std::uint32_t>(rng());
        const float f = std::bit_cast<float>(u);
        if (std::isnan(f)) continue;
        const auto want = static_cast<std::uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
        ASSERT_EQ(kiln::bfloat16(f).bits, want) << f;
    }
}

TEST(float_types, specials_follow_the_onnx_cast_tables) {
    const double huge = 1e300;
    for (const auto& f : formats()) {
        for (bool sat : {true, false}) {
            const bool s = f.has_saturate ? sat : f.k == kind::none;
            const std::uint32_t pinf = s ? f.pinf_sat : f.pinf_nosat, ninf = s ? f.ninf_sat : f.ninf_nosat;
            EXPECT_EQ(f.enc_f(INFINITY, sat), pinf) << f.name;
            EXPECT_EQ(f.enc_f(-INFINITY, sat), ninf) << f.name;
            EXPECT_EQ(f.enc_d(huge, sat), pinf) << f.name;
            EXPECT_EQ(f.enc_d(-huge, sat), ninf) << f.name;
            EXPECT_EQ(f.enc_f(std::numeric_limits<float>::max(), sat), pinf) << f.name;
            EXPECT_EQ(f.enc_f(std::numeric_limits<float>::quiet_NaN(), sat), f.pnan) << f.name;
            EXPECT_EQ(f.enc_f(-std::numeric_limits<float>::quiet_NaN(), sat), f.nnan) << f.name;
            EXPECT_EQ(f.enc_d(-std::numeric_limits<double>::quiet_NaN(), sat), f.nnan) << f.name;
            EXPECT_EQ(f.enc_f(0.0f, sat), 0u) << f.name;
            EXPECT_EQ(f.enc_f(-0.0f, sat), f.k == kind::fnuz ? 0u : f.sign()) << f.name;
            EXPECT_EQ(f.enc_d(-1e-300, sat), f.k == kind::fnuz ? 0u : f.sign()) << f.name;  // underflow keeps sign
            EXPECT_EQ(f.enc_d(5e-324, sat), 0u) << f.name;  // double subnormal
        }
    }
}

TEST(float_types, named_values) {
    using kiln::half;
    EXPECT_EQ(half(65504.0f).bits, 0x7BFF);
    EXPECT_EQ(half(65519.996f).bits, 0x7BFF);
    EXPECT_EQ(half(65520.0f).bits, 0x7C00);  // tie with the virtual 65536: overflow
    EXPECT_EQ(half(0x1p-24f).bits, 0x0001);
    EXPECT_EQ(half(0x1p-25f).bits, 0x0000);  // tie -> even (zero)
    EXPECT_EQ(half(0x1.8p-24f).bits, 0x0002);  // tie -> even (2 * 2^-24)
    EXPECT_EQ(half(0x1p-14).bits, 0x0400);
    EXPECT_EQ(half(0x1.ff8p-15).bits, 0x03FF);  // largest subnormal, from double
    EXPECT_EQ(half(0x1.ffcp-15).bits, 0x0400);  // tie with 2^-14 -> even
    EXPECT_EQ(kiln::bfloat16(0x1p-133f).bits, 0x0001);
    EXPECT_EQ(kiln::bfloat16(1.00390625f).bits, 0x3F80);  // tie -> even
    EXPECT_EQ(kiln::bfloat16(1.01171875f).bits, 0x3F82);  // tie -> even (up)
    EXPECT_EQ(kiln::fp8e4m3fn(448.0f).bits, 0x7E);
    EXPECT_EQ(kiln::fp8e4m3fn(464.0f).bits, 0x7E);  // tie -> even 448, not overflow
    EXPECT_EQ(kiln::fp8e4m3fn(464.5f, false).bits, 0x7F);
    EXPECT_EQ(kiln::fp8e4m3fn(0x1p-10f).bits, 0x00);   // half of 2^-9: tie -> 0
    EXPECT_EQ(kiln::fp8e4m3fn(0x1.8p-9f).bits, 0x02);  // 1.5 * 2^-9: tie -> even
    EXPECT_EQ(kiln::fp8e4m3fnuz(240.0f).bits, 0x7F);
    EXPECT_EQ(kiln::fp8e4m3fnuz(248.0f, false).bits, 0x80);
    EXPECT_EQ(kiln::fp8e4m3fnuz(-0x1p-12f).bits, 0x00);  // rounds to -0, which fnuz lacks
    EXPECT_EQ(kiln::fp8e5m2(57344.0f).bits, 0x7B);
    EXPECT_EQ(kiln::fp8e5m2(61440.0f, false).bits, 0x7C);
    EXPECT_EQ(kiln::fp8e5m2(61440.0f, true).bits, 0x7B);
    EXPECT_EQ(kiln::fp8e5m2(-INFINITY, true).bits, 0xFB);  // saturate: even inf becomes -max
    EXPECT_EQ(kiln::fp8e5m2fnuz(0x1p-17f).bits, 0x01);
    EXPECT_EQ(kiln::fp4e2m1(2.5f).bits, 0x4);   // tie -> 2 (even)
    EXPECT_EQ(kiln::fp4e2m1(-3.5f).bits, 0xE);  // tie -> -4 (even)
    EXPECT_EQ(kiln::fp4e2m1(0.25f).bits, 0x0);
    EXPECT_EQ(kiln::fp4e2m1(5.0f).bits, 0x6);   // tie between 4 and 6 -> 4 (even)
    EXPECT_EQ(kiln::fp4e2m1(1e9f, false).bits, 0x7);  // no inf: saturates regardless
    EXPECT_FLOAT_EQ(static_cast<float>(kiln::fp4e2m1::from_bits(0xF7)), 6.0f);  // high nibble ignored
}

}  // namespace
