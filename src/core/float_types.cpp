// Conversions of the low-precision formats (ONNX Cast semantics). The rounding itself is
// in float_codec.hpp; this file binds it to the public types, decodes the 8-bit formats
// through compile-time tables, and implements float8e8m0, which is not a binary float
// with a mantissa and has its own rounding modes.
#include "core/float_codec.hpp"

#include <kiln/float_types.hpp>

#include <array>
#include <bit>
#include <cstdint>

namespace kiln {

namespace {

using detail::decode_to_float_bits;
using detail::encode;
using detail::float_format;

template <std::size_t N>
constexpr std::array<std::uint32_t, N> make_decode_table(const float_format& f) {
    std::array<std::uint32_t, N> table{};
    for (std::uint32_t b = 0; b < N; ++b) table[b] = decode_to_float_bits(b, f);
    return table;
}

// 256 (16 for fp4) float patterns per format: decoding is a load.
constexpr auto e4m3fn_table = make_decode_table<256>(detail::e4m3fn_format);
constexpr auto e4m3fnuz_table = make_decode_table<256>(detail::e4m3fnuz_format);
constexpr auto e5m2_table = make_decode_table<256>(detail::e5m2_format);
constexpr auto e5m2fnuz_table = make_decode_table<256>(detail::e5m2fnuz_format);
constexpr auto e2m1_table = make_decode_table<16>(detail::e2m1_format);

// Spot checks that the tables hold what the ONNX float8/float4 docs list.
static_assert(e4m3fn_table[0x7E] == 0x43E0'0000u);    // 448
static_assert(e4m3fn_table[0x01] == 0x3B00'0000u);    // 2^-9
static_assert(e4m3fnuz_table[0x7F] == 0x4370'0000u);  // 240
static_assert(e5m2_table[0x7B] == 0x4760'0000u);      // 57344
static_assert(e5m2_table[0x7C] == 0x7F80'0000u);      // inf
static_assert(e5m2fnuz_table[0x01] == 0x3700'0000u);  // 2^-17
static_assert(e2m1_table[0x7] == 0x40C0'0000u);       // 6
static_assert(e2m1_table[0x9] == 0xBF00'0000u);       // -0.5

float table_float(const std::uint32_t* table, std::uint8_t bits) { return std::bit_cast<float>(table[bits]); }

std::uint8_t encode8(double d, const float_format& f, bool saturate) {
    return static_cast<std::uint8_t>(encode(d, f, saturate));
}

// float8e8m0 holds 2^(b-127) for b in 0..254; 255 is NaN. Works on |d| (the sign is
// ignored: ONNX leaves negative inputs unspecified, and its reference ignores it too).
std::uint8_t encode_e8m0(double d, bool saturate, e8m0_round mode) {
    constexpr std::uint8_t nan = 0xFF, max = 0xFE, min = 0x00;
    const auto a = std::bit_cast<std::uint64_t>(d) & 0x7FFF'FFFF'FFFF'FFFFull;
    constexpr std::uint64_t inf = 0x7FF0'0000'0000'0000ull;
    constexpr std::uint64_t mant_mask = (1ull << 52) - 1;
    if (a > inf) return nan;
    if (a == inf) return saturate ? max : nan;
    if (a == 0) return saturate ? min : nan;  // zero is below every value, in every mode
    // |d| = 1.f * 2^k, or for double subnormals something below 2^-1022 (k = -1023
    // with a fraction is enough to land below 2^-127 whatever the mode).
    const int k = static_cast<int>(a >> 52) - 1023;
    const std::uint64_t frac = a & mant_mask;
    int r = k;  // rounded exponent
    switch (mode) {
    case e8m0_round::up: r = frac != 0 ? k + 1 : k; break;
    case e8m0_round::down: break;
    case e8m0_round::nearest: r = (frac >> 51) != 0 ? k + 1 : k; break;  // 1.f >= 1.5: up
    }
    if (r > 127) return saturate ? max : nan;
    if (r < -127) {
        // Rounding up, anything in (0, 2^-127] lands on 2^-127 itself: not an underflow.
        if (mode == e8m0_round::up) return min;
        return saturate ? min : nan;
    }
    return static_cast<std::uint8_t>(r + 127);
}

}  // namespace

half::half(float f) : bits(static_cast<std::uint16_t>(encode(f, detail::fp16_format, false))) {}
half::half(double d) : bits(static_cast<std::uint16_t>(encode(d, detail::fp16_format, false))) {}
half::operator float() const { return std::bit_cast<float>(decode_to_float_bits(bits, detail::fp16_format)); }

bfloat16::bfloat16(float f) : bits(static_cast<std::uint16_t>(encode(f, detail::bf16_format, false))) {}
bfloat16::bfloat16(double d) : bits(static_cast<std::uint16_t>(encode(d, detail::bf16_format, false))) {}
// bf16 is the top half of a float32 (its subnormals are float subnormals): a shift.
bfloat16::operator float() const { return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16); }

#define KILN_SMALL_FLOAT_DEFS(NAME, FORMAT, TABLE)                                          \
    NAME::NAME(float f, bool saturate) : bits(encode8(f, detail::FORMAT, saturate)) {}     \
    NAME::NAME(double d, bool saturate) : bits(encode8(d, detail::FORMAT, saturate)) {}    \
    NAME::operator float() const { return table_float(TABLE.data(), bits); }
KILN_SMALL_FLOAT_DEFS(fp8e4m3fn, e4m3fn_format, e4m3fn_table)
KILN_SMALL_FLOAT_DEFS(fp8e4m3fnuz, e4m3fnuz_format, e4m3fnuz_table)
KILN_SMALL_FLOAT_DEFS(fp8e5m2, e5m2_format, e5m2_table)
KILN_SMALL_FLOAT_DEFS(fp8e5m2fnuz, e5m2fnuz_format, e5m2fnuz_table)
#undef KILN_SMALL_FLOAT_DEFS

// fp4 has no inf/NaN, so `saturate` cannot choose anything else: out of range always
// saturates to +-6 (the ONNX float4 Cast table).
fp4e2m1::fp4e2m1(float f, bool) : bits(encode8(f, detail::e2m1_format, true)) {}
fp4e2m1::fp4e2m1(double d, bool) : bits(encode8(d, detail::e2m1_format, true)) {}
// Only the low nibble is meaningful; upper bits are ignored when decoding.
fp4e2m1::operator float() const { return table_float(e2m1_table.data(), bits & 0x0F); }

fp8e8m0 to_fp8e8m0(double d, bool saturate, e8m0_round mode) {
    return fp8e8m0::from_bits(encode_e8m0(d, saturate, mode));
}
fp8e8m0 to_fp8e8m0(float f, bool saturate, e8m0_round mode) {
    return fp8e8m0::from_bits(encode_e8m0(f, saturate, mode));
}
fp8e8m0::fp8e8m0(float f, bool saturate) : bits(encode_e8m0(f, saturate, e8m0_round::up)) {}
fp8e8m0::fp8e8m0(double d, bool saturate) : bits(encode_e8m0(d, saturate, e8m0_round::up)) {}
fp8e8m0::operator float() const {
    if (bits == 0xFF) return std::bit_cast<float>(0x7FC0'0000u);
    if (bits == 0) return std::bit_cast<float>(0x0040'0000u);  // 2^-127, a float subnormal
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 23);
}

}  // namespace kiln
