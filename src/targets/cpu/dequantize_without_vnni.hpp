// On CPUs whose oneDNN has no VNNI int8 dot product (has_int8_dot_product: AVX2, AVX-512
// without VNNI), oneDNN's int8 kernels saturate and the integer ops would run on ref
// (mobilenet_v2_qdq 356 ms, bert_small_qdq 221 ms). There the fused integer ops go back to
// float: DequantizeLinear of x, the float convolution / matmul on weights dequantized once,
// a Clip for a narrowed saturation range, QuantizeLinear; the cpu lowering then runs them
// on oneDNN's fp32 kernels and Kiln's Q/DQ loops. A no-op where VNNI exists. The ops that
// Kiln's own exact int8 kernels take (selection.cpp's int8_gemm / int8_depthwise
// candidates: 1x1 and depthwise 3x3 convolutions, products with constant weights) stay.
#pragma once
#include "targets/cpu/cpu_options.hpp"

#include <kiln/module.hpp>

#include <string>

namespace kiln::cpu {

struct dequantize_without_vnni {
    cpu_options options;  // the program's (the own int8 kernels' rules read them)
    std::string name() const { return "cpu::dequantize_without_vnni"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu
