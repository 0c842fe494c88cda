// Linear quantization: quantize_linear, dequantize_linear (ONNX QuantizeLinear /
// DequantizeLinear, every opset: per-tensor, per-axis and blocked scales; int2..int16,
// uint2..uint16, fp8 and fp4 quantized types; output_dtype and precision attributes) and
// dynamic_quantize_linear.
//
// The scale (and zero point) granularity follows the scale's shape, as in ONNX:
//   per-tensor  scale has one element;
//   per-axis    scale is 1-D with x.lens[axis] elements (block_size 0);
//   blocked     scale has x's rank, and along `axis` ceil(x.lens[axis] / block_size)
//               elements, each shared by block_size consecutive elements of x.
// Because per-axis and blocked scales do not NumPy-broadcast against x, these ops do not
// claim traits().pointwise; a fusion pass may still treat an instance whose scale and
// zero point are scalars as pointwise, using the scalar `apply` functions below, which
// the reference compute calls for every element.
#pragma once
#include "ops/type_list.hpp"

#include <kiln/operation.hpp>

#include <cmath>
#include <optional>
#include <string>

namespace kiln::op {

// The types QuantizeLinear produces; DequantizeLinear also reads int32.
using quantized_int_types = type_list<std::int8_t, std::uint8_t, std::int16_t, std::uint16_t, kiln::int4,
                                      kiln::uint4, kiln::int2, kiln::uint2>;
using quantized_types = concat_t<quantized_int_types, fp8_types, type_list<fp4e2m1>>;
using dequantize_input_types = concat_t<quantized_types, type_list<std::int32_t>>;
// x of QuantizeLinear, and the scales of both.
using quantize_float_types = concat_t<float_types, type_list<std::int32_t>>;

struct quantize_linear_op {
    std::int64_t axis = 1;
    std::int64_t block_size = 0;
    bool saturate = true;               // fp8 outputs only
    type output_type = type::uint8;     // used when there is no zero point input
    std::optional<type> precision;      // type x and scale are divided in (default: their promotion)
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.block_size, "block_size");
        f(self.saturate, "saturate");
        f(self.output_type, "output_type");
        f(self.precision, "precision");
    }
    std::string name() const { return "quantize_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;

    // One element: `q` = x / scale already rounded to the division type, `zero_point` the
    // element's zero point. Integers: round half to even, add the zero point, saturate to
    // Q's range. fp8: a cast of q (the zero point is 0 for fp8). fp4: a cast of q + zero point.
    template <class Q>
    Q apply(double q, double zero_point) const {
        if constexpr (std::is_same_v<Q, fp4e2m1>) {
            return Q(static_cast<float>(q + zero_point));
        } else if constexpr (std::is_same_v<Q, fp8e4m3fn> || std::is_same_v<Q, fp8e4m3fnuz> ||
                             std::is_same_v<Q, fp8e5m2> || std::is_same_v<Q, fp8e5m2fnuz>) {
            return Q(q, saturate);
        } else {
            double lo, hi;
            if constexpr (std::is_integral_v<Q>) {
                lo = static_cast<double>(std::numeric_limits<Q>::lowest());
                hi = static_cast<double>(std::numeric_limits<Q>::max());
            } else {
                lo = Q::min();
                hi = Q::max();
            }
            double r = std::nearbyint(q);
            if (std::isnan(r)) r = 0;
            r = std::fmin(std::fmax(r + zero_point, lo), hi);
            if constexpr (std::is_integral_v<Q>) return static_cast<Q>(r);
            else return Q(static_cast<long long>(r));
        }
    }
};

struct dequantize_linear_op {
    std::int64_t axis = 1;
    std::int64_t block_size = 0;
    std::optional<type> output_type;  // default: the scale's type
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.block_size, "block_size");
        f(self.output_type, "output_type");
    }
    std::string name() const { return "dequantize_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;

    // One element in compute type C (float, or double for int32 data or double scales):
    // (x - zero_point) * scale, each step rounded to C as the ONNX reference does.
    template <class C>
    static C apply(C x, C zero_point, C scale) {
        return static_cast<C>(static_cast<C>(x - zero_point) * scale);
    }
};

// x -> (y uint8, scale float, zero_point uint8) from x's range extended to include 0.
struct dynamic_quantize_linear_op {
    std::string name() const { return "dynamic_quantize_linear"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
