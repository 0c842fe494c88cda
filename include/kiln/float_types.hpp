// Low-precision number formats: fp16, bf16, the ONNX fp8 family, fp4 (e2m1) and
// the packed integer types int4/uint4/int2/uint2.
//
// Every format is a trivially copyable struct holding its raw bits, so buffers of
// them can be memcpy'd and serialized as bytes. Sub-byte formats (fp4, int4, int2)
// are kept unpacked in memory, one element per byte; they are packed only at the
// ONNX boundary (TensorProto), which keeps every kernel and view byte-addressable.
//
// Conversions follow ONNX Cast: round to nearest, ties to even, with a single rounding
// from float and from double alike; fp8 from wider types saturates to the largest
// finite value when `saturate` is true (the ONNX default) and otherwise maps
// out-of-range values to inf/NaN as the format allows. fp4 always saturates (it has
// neither inf nor NaN). Decoding (operator float) is exact for every bit pattern.
#pragma once
#include <cstdint>

namespace kiln {

struct half {
    std::uint16_t bits = 0;
    half() = default;
    explicit half(float f);
    explicit half(double d);
    static half from_bits(std::uint16_t b) { half h; h.bits = b; return h; }
    operator float() const;  // NOLINT: implicit widening is exact
};

struct bfloat16 {
    std::uint16_t bits = 0;
    bfloat16() = default;
    explicit bfloat16(float f);
    explicit bfloat16(double d);
    static bfloat16 from_bits(std::uint16_t b) { bfloat16 h; h.bits = b; return h; }
    operator float() const;  // NOLINT: exact
};

// The fp8 and fp4 formats. `saturate` follows the ONNX Cast attribute.
#define KILN_DECLARE_SMALL_FLOAT(NAME)                                             \
    struct NAME {                                                                  \
        std::uint8_t bits = 0;                                                     \
        NAME() = default;                                                          \
        explicit NAME(float f, bool saturate = true);                              \
        explicit NAME(double d, bool saturate = true); /* no float double rounding */ \
        static NAME from_bits(std::uint8_t b) { NAME h; h.bits = b; return h; }    \
        operator float() const; /* NOLINT: exact */                                \
    }

KILN_DECLARE_SMALL_FLOAT(fp8e4m3fn);    // no inf, NaN = S.1111.111, max 448
KILN_DECLARE_SMALL_FLOAT(fp8e4m3fnuz);  // no inf, no -0, NaN = 0x80, max 240
KILN_DECLARE_SMALL_FLOAT(fp8e5m2);      // IEEE-like, has inf, max 57344
KILN_DECLARE_SMALL_FLOAT(fp8e5m2fnuz);  // no inf, no -0, NaN = 0x80, max 57344
KILN_DECLARE_SMALL_FLOAT(fp8e8m0);      // exponent only (2^(b-127)), NaN = 0xFF, no sign
KILN_DECLARE_SMALL_FLOAT(fp4e2m1);      // 4 bits in the low nibble, no inf/NaN, max 6;
                                        // NaN encodes as 0x8 (-0), see float_codec.hpp
#undef KILN_DECLARE_SMALL_FLOAT

// Rounding of ONNX Cast to float8e8m0 (attribute `round_mode`): `up` rounds away from
// zero (the default), `down` toward zero, `nearest` to the nearer power of two with
// ties (1.5 * 2^k) going up. The sign of the input is ignored (ONNX leaves negative
// inputs unspecified). NaN gives NaN. A rounded value above 2^127 (or inf) gives 2^127
// when `saturate`, else NaN; one below 2^-127 (zero, and under down/nearest tiny
// values) gives 2^-127 when `saturate`, else NaN, as in the ONNX Cast table.
// The fp8e8m0(float) constructor uses the ONNX default round mode, `up`.
enum class e8m0_round : std::uint8_t { up, down, nearest };
fp8e8m0 to_fp8e8m0(float f, bool saturate, e8m0_round mode);
fp8e8m0 to_fp8e8m0(double d, bool saturate, e8m0_round mode);

// Sub-byte integers, one per byte in memory. Construction from a wider integer keeps
// the low bits (two's complement wrap), which is what ONNX Cast to int4/int2 does (from
// floats, convert<>() first rounds to nearest even, per the ONNX int4/int2 docs);
// saturating conversions (QuantizeLinear) clamp before constructing.
#define KILN_DECLARE_SMALL_INT(NAME, STORAGE, BITS, SIGNED)                        \
    struct NAME {                                                                  \
        STORAGE value = 0;                                                         \
        static constexpr int bits = BITS;                                          \
        static constexpr bool is_signed = SIGNED;                                  \
        static constexpr int min() { return SIGNED ? -(1 << (BITS - 1)) : 0; }     \
        static constexpr int max() { return SIGNED ? (1 << (BITS - 1)) - 1 : (1 << BITS) - 1; } \
        NAME() = default;                                                          \
        explicit constexpr NAME(long long v) : value(wrap(v)) {}                   \
        static constexpr STORAGE wrap(long long v) {                               \
            auto low = static_cast<unsigned long long>(v) & ((1ull << BITS) - 1);  \
            if (SIGNED && (low >> (BITS - 1)) != 0) return static_cast<STORAGE>(static_cast<long long>(low) - (1ll << BITS)); \
            return static_cast<STORAGE>(low);                                      \
        }                                                                          \
        constexpr operator int() const { return value; } /* NOLINT */              \
    }

KILN_DECLARE_SMALL_INT(int4, std::int8_t, 4, true);
KILN_DECLARE_SMALL_INT(uint4, std::uint8_t, 4, false);
KILN_DECLARE_SMALL_INT(int2, std::int8_t, 2, true);
KILN_DECLARE_SMALL_INT(uint2, std::uint8_t, 2, false);
#undef KILN_DECLARE_SMALL_INT

}  // namespace kiln
