// The cpu target's lowering to oneDNN: convolutions and matrix products with their
// fused post-ops, then pooling, normalizations, reductions, concat, resampling and
// elementwise ops, each as a cpu:: op in destination-passing style (output buffer and
// scratchpad are `allocate`s that memory planning places in the arena). Whatever it
// does not claim is left for the reference kernels.
//
// Layout: activations of convolutions are channels-last (NHWC), a strided layout of the
// IR, so every other op reads them as they are; ops that keep their input's layout
// (pooling, eltwise, binary, ...) pass it on, and reorders are inserted only where a
// convolution gets something else or a program output is not row-major.
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
