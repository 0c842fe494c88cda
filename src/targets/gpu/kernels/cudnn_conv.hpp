// gpu::cudnn_conv: a float32, float16 or bfloat16 convolution (1, 2 or 3 spatial dims, any group count) on
// cuDNN's backend graph API, in destination-passing style: inputs (x, w, workspace,
// output). The bias and what follows (ReLU, residual add, ...) are not in it: the gpu
// pipeline's split_conv_bias pass moves a convolution's bias into an `add` after it, so
// fuse_pointwise makes bias + activation + residual one generated kernel (the epilogue).
// The workspace is an ordinary `allocate` the lowering inserts, planned in the arena.
//
// On a device, finalize (at compile and at load; nothing without a device) builds the
// operation graph (one CONVOLUTION_FORWARD over tensors x = 1, w = 2, y = 3, NCHW strides,
// 16-byte alignment), asks the heuristic (mode A, then the fallback list) for engine
// configurations, skips those whose numerical notes say they would not compute as asked
// (cudnn_note_allowed: float32 strict, i.e. no tensor cores (TF32) unless `tf32`; 16-bit
// data on tensor cores but summed in fp32; never down-converted inputs, reduced-precision
// sums, FFT or Winograd), and keeps the first whose execution plan finalizes with a workspace that
// fits the planned buffer. When none does, or cuDNN refuses the graph, compute runs the
// reference convolution on the host between copies (counted by cudnn_host_fallbacks(),
// the reason kept in host_reason() for the device tests to print). A 1-D convolution is
// described as a 2-D one with a height of 1, as cuDNN wants 4-D tensors at least.
#pragma once
#include <kiln/module.hpp>
#include <kiln/operation.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::gpu {

struct cudnn_conv_state;  // the execution plan and its engine (cudnn_conv.cpp)
class gpu_context;

// cuDNN's types for a convolution of element type t, chosen without a device (CUDNN_DATA_*
// values as ints: this header has no CUDA includes; `text` names them): x, w and y of the
// element type (FLOAT, HALF, BFLOAT16), the compute type always FLOAT (fp32 accumulation).
// Tensors are described NCHW, the row-major layout Kiln's tensors have: NHWC would need
// activations kept NHWC between convolutions and their generated epilogues (a layout
// pass), which the gpu target does not have yet; cuDNN's fp16 engines take NCHW.
struct cudnn_conv_types {
    int data = 0, compute = 0;
    std::string text;
};
cudnn_conv_types cudnn_types_of(type t);  // throws unsupported for other types
bool cudnn_element_type(type t);          // float32, float16, bfloat16

// An engine's numerical notes as far as the choice goes, and whether a convolution of
// element type t takes an engine that carries it (tf32: compile_options::tf32).
enum class cudnn_note : std::uint8_t { tensor_core, down_convert_inputs, reduced_precision_reduction, fft, winograd, other };
bool cudnn_note_allowed(cudnn_note n, type t, bool tf32);

struct cudnn_conv {
    std::vector<std::int64_t> pad_begin, pad_end, stride, dilation;  // one value per spatial dim
    std::int64_t group = 1;
    bool tf32 = false;  // float32: engines on TF32 tensor cores allowed
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.pad_begin, "pad_begin");
        f(self.pad_end, "pad_end");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.group, "group");
        f(self.tf32, "tf32");
    }
    std::shared_ptr<cudnn_conv_state> state;  // on the device, made by finalize (not saved)
    std::string name() const { return "gpu::cudnn_conv"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& output, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
    // Why this instruction runs on the host ("" when it runs on cuDNN or is not planned).
    std::string host_reason() const;
    // The chosen engine ("engine 12, workspace 0 B"), for profiles and the device tests.
    std::string engine() const;
};

// How many convolutions ran on the host because cuDNN had no plan its notes allow (process-wide).
std::size_t cudnn_host_fallbacks();

// The planned workspace of each convolution (the arena reuses it between them).
inline constexpr std::size_t cudnn_workspace_bytes = std::size_t{32} << 20;

// The lowering's test: a static float32/float16/bfloat16 convolution (no bias input) of 1-3 spatial dims
// with standard x and w, explicit or resolved padding, that cudnn_conv describes.
bool cudnn_conv_takes(instruction_ref ins);
// The op for such a convolution (its padding resolved from the input's size).
cudnn_conv make_cudnn_conv(instruction_ref ins);

}  // namespace kiln::gpu
