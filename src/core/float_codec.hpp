// Bit-exact encode/decode shared by every small binary float format (fp16, bf16, the
// fp8 family, fp4). Internal to src/core: the public face is include/kiln/float_types.hpp.
//
// One generic routine rather than one per format, because the formats differ only in
// field widths, bias, the largest finite pattern and how they spell inf/NaN; a single
// well-tested rounding path is easier to trust than seven hand-tuned ones.
//
// Encoding starts from a double. float -> double is exact, so float inputs and double
// inputs both get exactly one rounding (converting double -> float -> fp8 would round
// twice and can break ties the wrong way).
#pragma once
#include <bit>
#include <cstdint>

namespace kiln::detail {

// How a format spells its special values.
enum class specials : std::uint8_t {
    ieee,  // exponent all ones: inf (mantissa 0) or NaN (fp16, bf16, e5m2)
    fn,    // no inf; S.1111.111 is NaN (e4m3fn)
    fnuz,  // no inf, no -0; the pattern 1000...0 is the only NaN (e4m3fnuz, e5m2fnuz)
    none,  // no inf, no NaN (fp4 e2m1)
};

struct float_format {
    int exp_bits;
    int mant_bits;
    int bias;
    specials kind;
    std::uint32_t max_finite;  // magnitude bits (sign cleared) of the largest finite value
};

inline constexpr float_format fp16_format{5, 10, 15, specials::ieee, 0x7BFF};
inline constexpr float_format bf16_format{8, 7, 127, specials::ieee, 0x7F7F};
inline constexpr float_format e4m3fn_format{4, 3, 7, specials::fn, 0x7E};         // 448
inline constexpr float_format e4m3fnuz_format{4, 3, 8, specials::fnuz, 0x7F};     // 240
inline constexpr float_format e5m2_format{5, 2, 15, specials::ieee, 0x7B};        // 57344
inline constexpr float_format e5m2fnuz_format{5, 2, 16, specials::fnuz, 0x7F};    // 57344
inline constexpr float_format e2m1_format{2, 1, 1, specials::none, 0x7};          // 6

constexpr std::uint32_t sign_bit(const float_format& f) { return 1u << (f.exp_bits + f.mant_bits); }

// fp4 has no NaN. The ONNX Cast doc for float4 says NaN -> +6, but the ONNX reference
// implementation (ml_dtypes) and the backend conformance data (test_cast_*_to_FLOAT4E2M1)
// produce 0x8 (-0) for any NaN. We follow the conformance data; change this one constant
// to 0x7 to follow the prose instead.
inline constexpr std::uint32_t fp4_nan_bits = 0x8;

// Result for a value whose rounded magnitude exceeds the largest finite one (or is inf).
constexpr std::uint32_t encode_overflow(const float_format& f, std::uint32_t sign, bool saturate) {
    const std::uint32_t magnitude_mask = sign_bit(f) - 1;
    switch (f.kind) {
    case specials::ieee:
        return sign | (saturate ? f.max_finite : (magnitude_mask >> f.mant_bits) << f.mant_bits);
    case specials::fn: return sign | (saturate ? f.max_finite : magnitude_mask);
    case specials::fnuz: return saturate ? (sign | f.max_finite) : sign_bit(f);
    case specials::none: return sign | f.max_finite;  // always saturates
    }
    return 0;
}

// NaN keeps its sign where the format can (ieee, fn); ieee formats also keep the top
// payload bits and are made quiet, as IEEE 754 conversions do.
constexpr std::uint32_t encode_nan(const float_format& f, std::uint32_t sign, std::uint64_t payload52) {
    switch (f.kind) {
    case specials::ieee: {
        const std::uint32_t exp_ones = ((1u << f.exp_bits) - 1) << f.mant_bits;
        const std::uint32_t quiet = 1u << (f.mant_bits - 1);
        return sign | exp_ones | quiet | static_cast<std::uint32_t>(payload52 >> (52 - f.mant_bits));
    }
    case specials::fn: return sign | (sign_bit(f) - 1);
    case specials::fnuz: return sign_bit(f);
    case specials::none: return fp4_nan_bits;
    }
    return 0;
}

// Rounds `d` to the format, ties to even. `saturate` selects the ONNX Cast overflow
// rule; ieee formats with saturate=false overflow to inf like IEEE 754 (fp16/bf16
// always pass false).
constexpr std::uint32_t encode(double d, const float_format& f, bool saturate) {
    const auto u = std::bit_cast<std::uint64_t>(d);
    const std::uint32_t sign = (u >> 63) != 0 ? sign_bit(f) : 0u;
    const std::uint64_t a = u & 0x7FFF'FFFF'FFFF'FFFFull;
    constexpr std::uint64_t inf = 0x7FF0'0000'0000'0000ull;
    constexpr std::uint64_t mant_mask = (1ull << 52) - 1;
    if (a > inf) return encode_nan(f, sign, a & mant_mask);
    if (a == inf) return encode_overflow(f, sign, saturate);

    std::uint64_t magnitude = 0;
    if ((a >> 52) != 0) {  // double subnormals are far below every format's half-ulp: 0
        const int exp = static_cast<int>(a >> 52) - 1023;
        const std::uint64_t sig = (a & mant_mask) | (1ull << 52);
        const int emin = 1 - f.bias;  // exponent of the smallest normal
        int shift = 52 - f.mant_bits + (exp < emin ? emin - exp : 0);
        // Past 54 the value is below half the smallest subnormal whatever the bits.
        if (shift > 54) shift = 54;
        std::uint64_t q = sig >> shift;
        const std::uint64_t rem = sig & ((1ull << shift) - 1);
        const std::uint64_t half = 1ull << (shift - 1);
        if (rem > half || (rem == half && (q & 1) != 0)) ++q;
        // q carries the implicit bit, so a mantissa carry lands in the exponent field
        // and a subnormal rounding up to 2^emin becomes the smallest normal.
        magnitude = exp >= emin ? (static_cast<std::uint64_t>(exp - emin) << f.mant_bits) + q : q;
    }
    if (magnitude > f.max_finite) return encode_overflow(f, sign, saturate);
    if (magnitude == 0 && f.kind == specials::fnuz) return 0;  // no negative zero
    return sign | static_cast<std::uint32_t>(magnitude);
}

// The float32 bit pattern of a format value; exact for every pattern. Formats whose
// subnormals are float normals only (all here but bf16, which decodes by a shift).
constexpr std::uint32_t decode_to_float_bits(std::uint32_t b, const float_format& f) {
    const int width = f.exp_bits + f.mant_bits;
    const std::uint32_t s32 = ((b >> width) & 1u) << 31;
    const std::uint32_t magnitude = b & (sign_bit(f) - 1);
    const std::uint32_t mant_mask = (1u << f.mant_bits) - 1;
    std::uint32_t exp = magnitude >> f.mant_bits;
    std::uint32_t mant = magnitude & mant_mask;
    const std::uint32_t exp_ones = (1u << f.exp_bits) - 1;
    switch (f.kind) {
    case specials::ieee:
        if (exp == exp_ones) return s32 | 0x7F80'0000u | (mant << (23 - f.mant_bits));  // keeps payload
        break;
    case specials::fn:
        if (magnitude == sign_bit(f) - 1) return s32 | 0x7FC0'0000u;
        break;
    case specials::fnuz:
        if (b == sign_bit(f)) return 0xFFC0'0000u;  // the NaN pattern has its sign bit set
        break;
    case specials::none: break;
    }
    if (magnitude == 0) return s32;
    int e = static_cast<int>(exp);
    if (exp == 0) {  // subnormal: normalize so the leading one becomes the implicit bit
        const int lead = 31 - std::countl_zero(mant);  // position of the leading one
        e = 1 - (f.mant_bits - lead);
        mant = (mant << (f.mant_bits - lead)) & mant_mask;
    }
    const auto biased = static_cast<std::uint32_t>(e - f.bias + 127);
    return s32 | (biased << 23) | (mant << (23 - f.mant_bits));
}

}  // namespace kiln::detail
