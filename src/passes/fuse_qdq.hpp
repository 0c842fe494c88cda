// Quantized (QDQ) models: DequantizeLinear -> Conv / MatMul / Gemm [-> Relu / Clip]
// [-> QuantizeLinear] groups become one integer op with int32 accumulation and a fused
// requantize (op::quant_convolution, op::quant_dot; src/ops/quant_fused.hpp).
//
// Taken when the activation's DequantizeLinear has one scale and zero point (literals),
// the weights' has one or one per output channel with one zero point value, and the
// bias is a literal (float32, or an int32 DequantizeLinear: kept as int32 where its scale
// is exactly x_scale * w_scale per channel, else dequantized into a float32 literal).
// A QuantizeLinear with literal per-tensor parameters that is the only reader of the
// product (through at most one Relu or Clip with literal bounds, folded into its
// saturation range) becomes the op's quantized result; otherwise the result is float32,
// and a constant per-column bias Add after a matmul is folded in. Add(DQ(a), DQ(b)) -> Q
// (a residual add, all per tensor) becomes op::quant_add. Unfused Q and DQ stay.
#pragma once
#include <kiln/module.hpp>

namespace kiln {

struct fuse_qdq {
    std::string name() const { return "fuse_qdq"; }
    void apply(module& m) const;
};

}  // namespace kiln
