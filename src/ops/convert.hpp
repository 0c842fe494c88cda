// Element type conversions: convert (ONNX Cast / CastLike) and bitcast (ONNX BitCast).
// Both are pointwise; like the functors of pointwise.hpp each exposes the scalar function
// a code generator can call, `apply<To>(x)`, which the reference compute uses for every
// element. Unlike them, apply takes and returns storage values (half, fp8e4m3fn, ...),
// not compute_t values, because a conversion must round exactly once from the source.
#pragma once
#include "ops/string_number.hpp"
#include "ops/type_list.hpp"

#include <kiln/float_types.hpp>
#include <kiln/operation.hpp>

#include <bit>
#include <string>
#include <type_traits>

namespace kiln::op {

template <class T>
constexpr bool is_sub_byte_v = std::is_same_v<T, fp4e2m1> || std::is_same_v<T, kiln::int4> ||
                               std::is_same_v<T, kiln::uint4> || std::is_same_v<T, kiln::int2> ||
                               std::is_same_v<T, kiln::uint2>;
template <class T>
constexpr bool is_fp8_saturating_v = std::is_same_v<T, fp8e4m3fn> || std::is_same_v<T, fp8e4m3fnuz> ||
                                     std::is_same_v<T, fp8e5m2> || std::is_same_v<T, fp8e5m2fnuz>;

// ONNX Cast. `saturate` applies to the fp8 targets (false: out-of-range values become
// inf/NaN as the format allows); `round_mode` to float8e8m0 targets.
struct convert_op {
    type target_type = type::float32;
    bool saturate = true;
    e8m0_round round_mode = e8m0_round::up;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.target_type, "target_type");
        f(self.saturate, "saturate");
        f(self.round_mode, "round_mode");
    }
    std::string name() const { return "convert"; }
    op_traits traits() const { return {.pointwise = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;

    template <class To, class From>
    To apply(const From& x) const {
        if constexpr (std::is_same_v<To, From>) {
            return x;
        } else if constexpr (std::is_same_v<From, std::string>) {
            if constexpr (std::is_same_v<To, bool>) return parse_bool(x);
            else if constexpr (std::is_integral_v<To> && std::is_signed_v<To>) return convert_int<To>(parse_int64(x));
            else if constexpr (std::is_integral_v<To>) return convert_int<To>(parse_uint64(x));
            else if constexpr (is_sub_byte_v<To> && !std::is_same_v<To, fp4e2m1>) return To(parse_int64(x));
            else return apply<To>(parse_double(x));
        } else if constexpr (std::is_same_v<To, std::string>) {
            return to_string(x);
        } else if constexpr (std::is_same_v<To, fp8e8m0>) {
            return to_fp8e8m0(kiln::convert<double>(x), saturate, round_mode);
        } else if constexpr (is_fp8_saturating_v<To>) {
            return To(kiln::convert<double>(x), saturate);
        } else {
            return kiln::convert<To>(x);
        }
    }

private:
    // Integer text to an integer type: out-of-range values keep their low bits, as
    // integer casts do.
    template <class To, class I>
    static To convert_int(I v) {
        return static_cast<To>(v);
    }
    template <class From>
    static std::string to_string(const From& x) {
        if constexpr (std::is_same_v<From, bool>) return x ? "True" : "False";
        else if constexpr (std::is_integral_v<From>) return std::to_string(x);
        else if constexpr (is_sub_byte_v<From> && !std::is_same_v<From, fp4e2m1>) return std::to_string(int(x));
        else if constexpr (std::is_same_v<From, double>) return format_double(x);
        else if constexpr (std::is_same_v<From, half>) return format_half(x);
        else if constexpr (std::is_same_v<From, bfloat16>) return format_bfloat16(x);
        else return format_float32(static_cast<float>(x));
    }
};

// Bits an element occupies in ONNX (bool 8, int4 4, ...); 0 for string.
int type_bits(type t);

// ONNX BitCast: the same bits read as another type of the same width.
struct bitcast_op {
    type target_type = type::int32;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.target_type, "target_type");
    }
    std::string name() const { return "bitcast"; }
    op_traits traits() const { return {.pointwise = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;

    template <class To, class From>
    static To apply(const From& x) {
        if constexpr (is_sub_byte_v<From> || is_sub_byte_v<To>) return from_bits<To>(to_bits(x));
        else if constexpr (std::is_same_v<To, bool>) return to_bits(x) != 0;
        else if constexpr (sizeof(To) == sizeof(From)) return std::bit_cast<To>(x);
        else return To{};  // widths differ: compute_shape rejects this pair
    }

private:
    template <class T>
    static std::uint64_t to_bits(const T& x) {
        if constexpr (std::is_same_v<T, fp4e2m1>) return x.bits & 0xFu;
        else if constexpr (is_sub_byte_v<T>) return static_cast<std::uint64_t>(x.value) & ((1u << T::bits) - 1);
        else if constexpr (std::is_same_v<T, bool>) return x ? 1 : 0;
        else if constexpr (sizeof(T) == 1) return std::bit_cast<std::uint8_t>(x);
        else if constexpr (sizeof(T) == 2) return std::bit_cast<std::uint16_t>(x);
        else if constexpr (sizeof(T) == 4) return std::bit_cast<std::uint32_t>(x);
        else return std::bit_cast<std::uint64_t>(x);
    }
    template <class T>
    static T from_bits(std::uint64_t b) {
        if constexpr (std::is_same_v<T, fp4e2m1>) return fp4e2m1::from_bits(static_cast<std::uint8_t>(b & 0xFu));
        else if constexpr (is_sub_byte_v<T>) return T(static_cast<long long>(b));
        else if constexpr (std::is_same_v<T, bool>) return b != 0;
        else if constexpr (sizeof(T) == 1) return std::bit_cast<T>(static_cast<std::uint8_t>(b));
        else if constexpr (sizeof(T) == 2) return std::bit_cast<T>(static_cast<std::uint16_t>(b));
        else if constexpr (sizeof(T) == 4) return std::bit_cast<T>(static_cast<std::uint32_t>(b));
        else return std::bit_cast<T>(b);
    }
};

}  // namespace kiln::op
