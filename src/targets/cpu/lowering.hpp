// The cpu target's lowering to oneDNN: convolutions and matrix products with their
// fused post-ops, then pooling, normalizations, reductions, concat, resampling and
// elementwise ops, each as a cpu:: op in destination-passing style (output buffer and
// scratchpad are `allocate`s that memory planning places in the arena). Whatever it
// does not claim is left for the reference kernels.
//
// Layout: each convolution lets oneDNN choose its source and destination layouts
// (format any; blocked nChw8c on AVX2 for most). Such an instruction keeps its logical
// row-major IR shape, its bytes are in the recorded layout (op.dst_layout) in a uint8
// buffer of the layout's size. Ops that take oneDNN layouts (pooling, eltwise, binary,
// batch norm, LRN, concat, resampling, the next convolution's post-op inputs) pass them
// on; reorders to row-major are inserted only where anything else reads such a value
// (a layout boundary) and before program outputs. Weights are reordered once, at
// compile time, into the layout the primitive wants.
//
// Left to the reference kernels on purpose: 0-D results (oneDNN reads a 0-D descriptor
// as empty), reduce max/min (oneDNN starts from -FLT_MAX, so a row of -inf gives a
// finite value), log and softplus (oneDNN's approximations miss ONNX's expected values).
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln::cpu {

class cpu_context;

struct lowering {
    cpu_context* ctx = nullptr;
    std::string name() const { return "cpu::lowering"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu
