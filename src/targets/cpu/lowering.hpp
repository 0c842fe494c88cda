// The cpu target's lowering to oneDNN and Kiln's own kernels: convolutions and matrix
// products with their fused post-ops, then pooling, normalizations, reductions, concat,
// resampling and elementwise ops, each as a cpu:: op in destination-passing style (output
// buffer and scratchpad are `allocate`s that memory planning places in the arena).
// Whatever it does not claim is left for the reference kernels.
//
// It runs as named passes (lowering_passes, in this order), so KILN_TRACE_PASSES,
// KILN_TIME_PASSES and validation see each step:
//   cpu::lower_dynamic     a generic program's convolutions and poolings: oneDNN primitives
//                          made per shape (dyn_primitive.hpp); refuses what has no kernel
//                          for a range of shapes
//   cpu::fold_layer_norm   mean/variance chains into layer_norm (fusion.hpp)
//   cpu::fuse_attention    softmax(QK^T)V into cpu::attention (attention.hpp), before the
//                          matmuls are planned: they are attention's parts
//   cpu::plan_layouts      convolutions to plan in 16-channel blocks so a 1x1 + depthwise
//                          pair can run as one oneDNN kernel (dw_fusion.hpp)
//   cpu::plan_anchors      each convolution and matrix product with the post-ops it
//                          absorbs (each elementwise op fused at most once), and the
//                          1x1 + depthwise pairs merged; changes no instruction
//   cpu::lower_instructions  in program order, the planned anchors as their kernels and
//                          every other op it covers (one walk: an anchor must see the
//                          final layouts of the ops before it)
//   cpu::insert_reorders   reorders to row-major where anything else reads a value in a
//                          oneDNN layout, and before program outputs
// The passes of one compile share per-module state (lowering_state: layouts, derived
// constants, plans), released after the last.
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
#include <kiln/pass.hpp>

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::cpu {

class cpu_context;

// What the lowering passes of one compile share, per module.
class lowering_state {
public:
    struct per_module;  // lowering.cpp
    lowering_state();
    ~lowering_state();
    per_module& of(module& m, cpu_context& ctx);
    void release(const module& m);

private:
    std::unordered_map<const module*, std::unique_ptr<per_module>> modules_;
};

// One named step of the lowering (see the list above).
struct lowering_phase {
    std::string phase;
    void (*run)(lowering_state::per_module&) = nullptr;
    cpu_context* ctx = nullptr;
    std::shared_ptr<lowering_state> state;
    bool last = false;  // releases the module's state after it runs
    std::string name() const { return phase; }
    void apply(module& m) const;
};

// The lowering's passes, in order, sharing one lowering_state.
std::vector<pass> lowering_passes(cpu_context& ctx);

}  // namespace kiln::cpu
