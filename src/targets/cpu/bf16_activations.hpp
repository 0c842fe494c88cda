// Keeps a bf16 program's activations in bf16 between the convolutions that compute in bf16
// (cpu::convolution with `bf16`, widen_reduced.hpp): a convolution whose result another
// such convolution reads as its source, or sums into in place (the residual of
// sum_post_op.hpp), writes it in bf16 in its planned layout (dst_layout's data type), and
// those readers take it as it is; so does a max pooling (on oneDNN) read only as such
// convolutions' source, which then pools bf16 (exact: the max of bf16-rounded values is the
// rounded max; ResNet's stem). Any other reader (an average pooling, a concat, the reorder
// before an output, another op's post-op input) reads a float32 copy in the same layout,
// made once by a converting cpu::reorder right after it. A residual chain (each block's result
// written into the one before) is bf16 as a whole or not at all, since one buffer holds it.
//
// Why: a bf16 convolution that reads float32 converts its whole source to bf16 before it
// runs (4 bytes read and 2 written per element, a pass over memory of its own), and a
// float32 result costs twice the bytes to write and to read back. In a ResNet nearly every
// activation runs from one convolution to the next.
//
// Numbers: a bfloat16 program (quantize_bf16) rounds every activation to bf16, and the ref
// target computes it that way; keeping these in bf16 follows the program, where the
// widened float32 activations were closer to float32 than it asked.
//
// Runs after the lowering and before memory planning (the buffers are half the size). A
// program saved with such convolutions and loaded on a CPU without native bf16 computes in
// float32 there: the bf16 source converted as the kernel runs and its result converted
// back, the residual read in first (op_conv.hpp). KILN_CPU_BF16_ACTIVATIONS=0 keeps every
// activation float32.
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln::cpu {

class cpu_context;

struct keep_bf16_activations {
    cpu_context* ctx = nullptr;
    std::string name() const { return "cpu::keep_bf16_activations"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu
