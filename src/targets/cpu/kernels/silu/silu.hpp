// cpu::silu: x * sigmoid(x) over a float32 tensor in any dense layout (row-major or the
// blocked one of the convolution that produced it), written in the same layout.
//
// Why not oneDNN: oneDNN 2.6 on AVX2 computes swish slowly, as a convolution post-op
// and as an eltwise primitive alike (EfficientNet-B0's 32x112x112 depthwise convolution:
// 0.15 ms alone, 0.47 ms with the swish post-op; the eltwise primitive 0.27 ms for the
// same 401k values). ONNX Runtime's separate QuickGelu pass takes 0.17 ms. On a Zen 5
// EPYC with AVX-512 the post-op still loses on every layer from 28x28 up (EfficientNet-B0
// 6.61 against 6.23 ms, docs/performance.md). This kernel is
// one pass of exp, reciprocal and product, 8 lanes at a time with AVX2 and FMA (chosen by
// cpuid at run time, so a saved program runs on any x86-64), a scalar loop otherwise.
//
// It is used with fast_math only (its exp is a polynomial: within 1e-6 relative error of
// the exact function wherever the result is a normal float above x = -87, within 1e-5
// down to the smallest normal results near x = -92), for results of at least `silu_min_elements` values; smaller ones
// stay oneDNN post-ops (a separate pass costs more than it saves there).
// Since silu(0) = 0, the zero padding of a blocked layout stays zero.
//
// Inputs: (x) to compute in place, when x is a kernel's result that nothing else reads
// (the usual case: no second buffer, and the values are overwritten while in cache), or
// (x, output buffer). KILN_CPU_SILU=dnnl keeps SiLU on oneDNN.
//
// With `mean_layout` (squeeze-and-excitation: a global average pooling reads the SiLU's
// result, EfficientNet's 16 blocks), the same pass also sums each channel over the pixels
// and writes the means into one more input, a buffer in `mean_layout` (x's kind of
// layout, 1x1 pixels) that a cpu::silu_means after it hands on: the pooling's separate
// pass over the activation and its parallel region go. KILN_CPU_SILU_MEANS=0 keeps the
// pooling on its own kernel.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>

namespace kiln::cpu {

// Below this many values a SiLU after a convolution or matmul stays a oneDNN post-op.
constexpr std::size_t silu_min_elements = 8192;

struct silu {
    md_record layout;       // x's oneDNN layout (empty: x's own, dense, strides)
    md_record mean_layout;  // the channel means' (empty: none; else the last input)

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.layout, "layout");
        f(self.mean_layout, "mean_layout");
    }
    std::string name() const { return "cpu::silu"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    // x (in place) or the output buffer: the last input, or the one before the means.
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - (mean_layout.dims.empty() ? 1 : 2);
    }
};

// The channel means a cpu::silu with mean_layout wrote: a view of that buffer, after the
// SiLU. Inputs: (the cpu::silu, the means buffer).
struct silu_means {
    md_record layout;  // the means' (the SiLU's mean_layout)

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.layout, "layout");
    }
    std::string name() const { return "cpu::silu_means"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 1; }
};

// Whether Kiln's own SiLU kernel is wanted (fast_math on, not switched off by
// KILN_CPU_SILU=dnnl: cpu_options::silu).
bool own_silu_enabled(const cpu_options& o);

// Replaces `mul` = x * `sig` (sig = sigmoid(x), used only by mul) by a cpu::silu of x
// and removes sig; false, changing nothing, when it does not apply.
bool lower_silu(lower_env& env, instruction_ref mul, instruction_ref sig);

// sigmoid(x) * x (either order), the sigmoid feeding only this product: the sigmoid.
std::optional<instruction_ref> silu_sigmoid(instruction_ref mul);

// Replaces `pool`, a global average pooling (result in `dst_layout`) of a cpu::silu's
// result in a layout with channels per pixel, by the SiLU's means (cpu::silu_means);
// false, changing nothing, when it does not apply or KILN_CPU_SILU_MEANS=0.
bool fuse_silu_means(lower_env& env, instruction_ref pool, const md_record& dst_layout);

namespace silu_kernels {
// Which kernels: the best this CPU has (AVX-512, else AVX2 and FMA, else portable), at
// most AVX2, or the portable one (for tests).
enum class kernels { best, avx2, portable };
// y[i] = x[i] * sigmoid(x[i]) for i < n, one thread.
void run(const float* x, float* y, std::size_t n, kernels k = kernels::best);
// The same over `rows` rows of `width` values (dense), adding each column's results
// into sums[width].
void run_summing(const float* x, float* y, std::size_t rows, std::size_t width, float* sums,
                 kernels k = kernels::best);
}  // namespace silu_kernels

}  // namespace kiln::cpu
