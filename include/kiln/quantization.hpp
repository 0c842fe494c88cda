// Reduced-precision program transformations, run before compile (as MIGraphX's
// quantize_fp16 / quantize_bf16): the result compiles, saves and loads like any program.
#pragma once
#include <kiln/program.hpp>
#include <kiln/target.hpp>
#include <kiln/types.hpp>

#include <cstddef>
#include <functional>
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

// How an activation's range is chosen from what the calibration runs saw.
enum class calibration_method {
    minmax,      // the smallest and largest value seen (default)
    percentile,  // |x| clipped at the given percentile of all values seen
    entropy,     // |x| clipped where the KL divergence of the quantized histogram is least (TensorRT)
};
// "minmax", "percentile", "entropy"; anything else is refused (invalid_argument).
calibration_method calibration_method_from_name(const std::string& name);
std::string calibration_method_name(calibration_method m);

struct int8_options {
    // IR op names: "convolution", "matmul", "gemm", "dot" (matmul and gemm). Others are refused.
    std::vector<std::string> ops = {"convolution", "dot"};
    calibration_method method = calibration_method::minmax;
    double percentile = 99.99;  // method percentile: in (50, 100]
    std::string dump_scales;     // a file to write the scales to (JSON), or ""
    // int8: also quantize the inputs of each residual add (same shapes, no constant) whose
    // result, through at most one Relu/Clip, is quantized anyway for a chosen op, so the add
    // runs on 8-bit values (quant_add) and the products before it requantize; an add read by
    // anything else (a LayerNorm) stays float32. false: every add stays float32.
    bool quantize_adds = true;
    // int8, with quantize_adds: where one input of such an add is a chosen convolution read
    // by nothing but the add, that input gets no Q/DQ (the convolution's float result goes
    // into the add) and fuse_qdq makes the convolution, the add, its Relu/Clip and the Q one
    // quant_convolution with the other input as a residual operand (oneDNN's in-place sum
    // post-op on the cpu target): one rounding fewer and no 8-bit tensor written and read
    // again. false: the convolution requantizes and the add is a quant_add (the form
    // quantized ONNX models have), for A/B comparisons.
    bool fuse_residual = true;
    // Called after each calibration run (done of total), e.g. for a progress bar.
    std::function<void(std::size_t done, std::size_t total)> progress;
};

// The residual-add switches by one name (CLI --int8-residual-adds, Python residual_adds):
// "fuse" (quantize_adds and fuse_residual, the default), "quant_add" (quantize_adds only:
// each add a quant_add after requantizing convolutions, the form quantized ONNX models
// have) or "float" (adds stay float32). Anything else is refused (invalid_argument).
void set_residual_adds(int8_options& o, const std::string& name);
std::string residual_adds_name(const int8_options& o);

// What quantize_int8 did.
struct int8_summary {
    std::size_t quantized_ops = 0;        // convolutions / matmuls / gemms given Q/DQ inputs
    std::size_t quantized_adds = 0;       // residual adds given Q/DQ inputs (int8_options::quantize_adds)
    std::size_t residual_convolutions = 0;  // of those, adds whose convolution input takes them (fuse_residual)
    std::size_t activation_tensors = 0;   // activations calibrated (one scale each)
    std::size_t calibration_runs = 0;     // program runs (one per set; two per set unless minmax)
    std::vector<std::string> skipped;     // chosen ops left float32, each with the reason
    double seconds = 0;                   // wall time, compile of the calibration copy included
};

// Post-training static int8 quantization (MIGraphX's quantize_int8). Runs the float32
// program, compiled for `t` with every activation to quantize as an extra output, over
// every calibration set, records each activation's range, then rewrites the program into
// the QuantizeLinear/DequantizeLinear form of quantized ONNX models: activations per
// tensor (uint8 asymmetric; the second operand of a product of two activations int8
// symmetric), weights int8 symmetric per output channel. Compiling the result lets the
// fuse_qdq pass make quant_convolution / quant_dot of them (docs/quantization.md).
// Softmax, the norms and residual adds stay float32. Inputs and outputs stay float32.
int8_summary quantize_int8(program& p, const target& t, const std::vector<param_map>& calibration,
                           const int8_options& options = {});

// Post-training float8 (MIGraphX's quantize_fp8): quantize_int8's choice of ops and its
// calibration, but activations and weights both float8e4m3fn (range +-448) with one scale
// per tensor (amax / 448, no zero point), as QuantizeLinear/DequantizeLinear pairs. On CPUs
// without fp8 arithmetic the ops compute in float32 on the fp8 values (docs/quantization.md).
// The metadata records "quantized": "float8e4m3fn".
int8_summary quantize_fp8(program& p, const target& t, const std::vector<param_map>& calibration,
                          const int8_options& options = {});

// What quantize_int4_weights did.
struct int4_summary {
    std::size_t quantized_ops = 0;          // matmuls / gemms now matmul_int4
    std::size_t weight_bytes_before = 0;    // their float32 weights
    std::size_t weight_bytes_after = 0;     // packed int4 values and float32 scales
    std::vector<std::string> skipped;       // matmuls / gemms left float32, each with the reason
};

// Weight-only int4 (the low-bit path of LLM deployments): every float32 matmul / gemm
// whose weights are a 2-D float32 literal becomes a matmul_int4 with the weights int4
// symmetric, packed two per byte, and one float32 scale per block of `block_size` rows of
// K in each column (docs/quantization.md). Activations, convolutions and the rest stay
// float32. The metadata records "quantized": "int4".
int4_summary quantize_int4_weights(program& p, std::size_t block_size = 32);

// The reduced type a program was quantized to (type::float32 when it was not): recorded in
// the program's metadata ("quantized": "float16", "int8"), so it survives .kiln files.
type quantized_type(const program& p);

}  // namespace kiln
