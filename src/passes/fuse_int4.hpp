// ONNX's int4 weights (opset 21): a DequantizeLinear of an INT4 / UINT4 constant [K, N]
// (blocked along K, per column, or per tensor; zero points taken) read only as the
// weights of MatMuls becomes op::matmul_int4, so an ONNX int4 model runs on the same
// kernels as quantize_int4_weights' programs and keeps its weights 4-bit. Called by
// fuse_qdq, before propagate_constants would fold the DequantizeLinear into float32.
#pragma once
#include <kiln/module.hpp>

namespace kiln {

void fuse_int4_weights(module& m);

}  // namespace kiln
