// matmul_int4: a product with int4 weights, packed two per byte, and one float32 scale
// (and optionally one int4 zero point) per block of `block_size` rows of K in each column:
// the weight-only low-bit form of quantize_int4_weights and of ONNX's blocked
// DequantizeLinear of INT4 weights feeding a MatMul (opset 21).
//
// Inputs (a, b, scales[, zero_points]):
//   a            float32 [..., K] (every leading dim is a row; they may be dynamic);
//   b            uint8 [ceil(K N / 2)]: the int4 values of the [K, N] weights, row-major,
//                element i in the low nibble of byte i / 2 when i is even, else the high
//                one, two's complement (ONNX's INT4 packing, so an ONNX initializer's bytes
//                are taken as they are);
//   scales       float32 [ceil(K / block_size), N];
//   zero_points  uint8 [ceil(ceil(K / block_size) N / 2)], int4 packed as b (absent: 0).
// Result float32 [..., N]: a times w, w[k][n] = (q[k][n] - z[k / bs][n]) * s[k / bs][n]
// rounded to float32 as DequantizeLinear does, then the product summed in double.
//
// One op rather than DequantizeLinear -> MatMul: the weights stay 4-bit in the program and
// in .kiln files (a DequantizeLinear of a constant would be folded into float32 weights),
// and a target's kernel unpacks them where it multiplies.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

struct matmul_int4 {
    std::int64_t block_size = 32;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.block_size, "block_size");
    }
    std::string name() const { return "matmul_int4"; }
    // a's leading dims may vary (a generic program); K and the weights are fixed.
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// The int4 value (-8..7) of element i of packed bytes p.
inline int int4_at(const std::uint8_t* p, std::size_t i) {
    const int nib = (i % 2 == 0) ? (p[i / 2] & 0x0F) : (p[i / 2] >> 4);
    return nib >= 8 ? nib - 16 : nib;
}
// Packs int4 values (-8..7) two per byte as above.
std::vector<std::uint8_t> pack_int4(const std::vector<std::int8_t>& values);

// The float32 weights [K][N] a matmul_int4 multiplies by (what a DequantizeLinear gives).
std::vector<float> dequantize_int4(const std::uint8_t* b, const float* scales, const std::uint8_t* zero_points,
                                   std::size_t k, std::size_t n, std::size_t block_size);

}  // namespace kiln::op
