// Reduced-precision program transformations, run before compile (as MIGraphX's
// quantize_fp16 / quantize_bf16): the result compiles, saves and loads like any program.
#pragma once
#include <kiln/program.hpp>
#include <kiln/types.hpp>

#include <string>
#include <vector>

namespace kiln {

// Makes the chosen ops of the main module compute in float16 (bfloat16). Their float32
// weights and constants are converted once, here; float32 inputs are kept, with a convert
// after each, and a convert back to float32 is inserted before every output, so callers
// still give and get float32.
//
// ops = {"all"}: convolution, deconvolution, matmul, gemm and pooling always; elementwise
// and data-movement ops (add, relu, concat, reshape, ...) when their float inputs are reduced
// values or constants (scalars only if exact in the reduced type), so activations stay reduced
// between the heavy ops. Ops whose accuracy
// needs float32 (softmax, layer/batch/instance norms, reductions, exp, log, pow) stay float32
// (docs/quantization.md). Otherwise a list of op names ("convolution", "matmul"; "dot" means
// matmul and gemm), each converted wherever it appears. Unknown names are refused.
void quantize_fp16(program& p, const std::vector<std::string>& ops = {"all"});
void quantize_bf16(program& p, const std::vector<std::string>& ops = {"all"});
// Either, by element type (float16 or bfloat16).
void quantize_float(program& p, type reduced, const std::vector<std::string>& ops = {"all"});

// The reduced type a program was quantized to (type::float32 when it was not): recorded in
// the program's metadata ("quantized": "float16"), so it survives .kiln files.
type quantized_type(const program& p);

}  // namespace kiln
