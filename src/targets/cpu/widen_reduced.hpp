// Runs 16-bit float computations (float16, bfloat16: a quantize_fp16/bf16 program, or a
// model written in them) in float32 on the cpu target: every instruction with such a
// result is rebuilt on float32 inputs, 16-bit constants are widened once at compile time
// (exactly: their values stay those of the 16-bit type), a convert to 16 bits whose
// readers all compute in float32 is skipped, and a 16-bit value that something else reads
// (a returned one, an op kept as it was) is converted back.
//
// Why: the cpu target's kernels (oneDNN, packed GEMM, generated fused kernels) are float32;
// a 16-bit instruction would otherwise run on the reference kernels, tens of times slower.
// Zen 4 has no AVX512-FP16, so float16 has no faster compute to offer. bfloat16 convolutions
// go back to bf16 inside oneDNN's kernel, and products with constant weights to packed_gemm's
// bf16 kernels, where the CPU has AVX512-BF16 (below; docs/quantization.md).
// The weights keep the 16-bit values the user asked for; activations are not rounded
// between ops, so the cpu's result is closer to float32 than the ref target's.
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln::cpu {

class cpu_context;

// With `ctx`: when a bfloat16 convolution is widened and the CPU runs bf16 natively
// (has_native_bf16; KILN_CPU_BF16=0 turns it off), ctx->bf16_convolutions is set, and the
// oneDNN convolutions then compute in bf16 with float32 accumulation and results; when a
// bfloat16 matmul or gemm is, ctx->bf16_matmuls, and packed_gemm takes the products whose
// weights are bf16 values in bf16 (packed_gemm.hpp).
struct widen_reduced_precision {
    cpu_context* ctx = nullptr;
    std::string name() const { return "cpu::widen_reduced_precision"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu
