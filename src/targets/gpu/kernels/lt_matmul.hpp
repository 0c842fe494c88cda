// gpu::lt_matmul: a float32 matrix product on cuBLASLt (matmul; gemm with alpha, its
// transposes and a bias C of N values), in destination-passing style: inputs (a, b,
// workspace, output), or (a, b, bias, workspace, output) with cuBLASLt's bias epilogue. The workspace
// is an ordinary `allocate` the lowering inserts, so memory planning places it in the
// arena with everything else and eval allocates nothing.
//
// On a device, finalize (at compile and at load; nothing without a device) makes the
// matmul descriptor (lt_descriptor_types: CUBLAS_COMPUTE_32F, strict fp32, unless `tf32`;
// fp16/bf16 operands accumulate in fp32 too) and the three layouts of
// lt_plan, and asks cuBLASLt's heuristic for an algorithm that fits the planned
// workspace (when it has none, compute runs the reference product on the host between
// copies, counted by lt_host_fallbacks); compute runs cublasLtMatmul on the context's stream. The one epilogue so far
// is CUBLASLT_EPILOGUE_BIAS (gemm's C as a vector over the output's columns, beta 1); ReLU
// and GELU epilogues come with a lowering that fuses them.
//
// Row-major without a layout attribute: cuBLASLt is column-major, and a row-major M x N
// product D = op(A) op(B) is, read column-major, the N x M product D^T = op(B)^T op(A)^T.
// So cuBLASLt's "A" is our b and its "B" our a (lt_plan below, checked without a device
// in tests/gpu).
#pragma once
#include <kiln/operation.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::gpu {

// One column-major matrix operand as cuBLASLt sees it.
struct lt_layout {
    std::uint64_t rows = 0, cols = 0;
    std::int64_t ld = 0;
    std::int64_t batch_stride = 0;  // elements between matrices of a batch
    bool transposed = false;        // CUBLAS_OP_T on this operand
};

// cuBLASLt's view of a float32 product out = op(a) op(b) (logical lens [..., M, K] and
// [..., K, N]; out standard): m = N, n = M, k = K, "A" = b, "B" = a, D = out. Operands
// may be row-major or transposed views of row-major matrices (cuBLASLt's op T), with
// batch dims that collapse into one stride, or none (a matrix every batch reads: stride
// 0); a batch of row-major a against one b is folded into one product of batch * M rows.
struct lt_plan {
    std::uint64_t m = 0, n = 0, k = 0;
    std::int32_t batch = 1;
    lt_layout first;   // cuBLASLt's A: our b
    lt_layout second;  // cuBLASLt's B: our a
    lt_layout out;     // C and D
};
// Throws a kiln shape error for operands it cannot describe (other strides, batch dims
// that differ, a batch over 2^31). The lowering takes a matmul when this accepts it.
lt_plan plan_lt(const shape& a, const shape& b, const shape& out, bool trans_a, bool trans_b);

// A product's cuBLASLt types, chosen without a device: the element type of A, B, C and D
// (CUDA_R_32F, CUDA_R_16F or CUDA_R_16BF: all four the operands' type), the compute type
// (CUBLAS_COMPUTE_32F: fp32 accumulation, strict for float32 operands; with `tf32` and
// float32 operands CUBLAS_COMPUTE_32F_FAST_TF32) and the scale type of alpha/beta (always
// CUDA_R_32F, as CUBLAS_COMPUTE_32F requires). The values are the CUDA enums, as ints
// (this header has no CUDA includes); `text` names them.
struct lt_types {
    int data = 0, compute = 0, scale = 0;
    std::string text;
};
// Throws a kiln unsupported error for other element types.
lt_types lt_descriptor_types(type t, bool tf32);
// Whether cuBLASLt takes operands of this element type (float32, float16, bfloat16).
bool lt_element_type(type t);

struct lt_state;  // descriptors and the chosen algorithm (lt_matmul.cpp)
class gpu_context;

struct lt_matmul {
    bool trans_a = false;
    bool trans_b = false;
    float alpha = 1.0f;
    bool bias = false;  // input 2 is a bias of N values (cuBLASLt's bias epilogue)
    bool tf32 = false;  // float32 products may use TF32 tensor cores (compile_options::tf32)
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.trans_a, "trans_a");
        f(self.trans_b, "trans_b");
        f(self.alpha, "alpha");
        f(self.bias, "bias");
        f(self.tf32, "tf32");
    }
    std::shared_ptr<lt_state> state;  // on the device, made by finalize (not saved)
    std::string name() const { return "gpu::lt_matmul"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& output, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
    // When cuBLASLt's heuristic found no algorithm at finalize: the reference product on
    // the host between copies.
    argument on_host(gpu_context& g, const shape& output, const std::vector<argument>& args) const;
};

// How many products ran on the host because cuBLASLt had no algorithm (process-wide).
std::size_t lt_host_fallbacks();

// cuBLASLt's workspace: 32 MiB, what NVIDIA recommends for Hopper.
inline constexpr std::size_t lt_workspace_bytes = std::size_t{32} << 20;

}  // namespace kiln::gpu
