// The gpu target's own passes, in pipeline order (target.cpp lists the whole pipeline):
//
//   gpu::fuse_attention: each softmax(Q K^T [scaled] [+ mask]) V as one generated kernel
//     (selection.hpp's attention candidate), before fusion groups the scale and mask add
//     and before the lowering walk would give Q K^T to cuBLASLt.
//   fuse_pointwise (make_fusion_pass): elementwise chains into fused groups, with the gpu
//     rules: ops and element types the generator handles, static shapes, no reductions yet
//     (KILN_GPU_FUSION=0: no grouping; lone ops still get kernels).
//   gpu::lowering: each instruction to the first candidate of selection.cpp that takes it
//     (generated kernels, cuBLASLt with its workspace as a planned buffer); the rest stays
//     for the reference kernels (ref::lowering, next in the pipeline).
//   gpu::compile_kernels (codegen/compile_pass.hpp): every generated kernel of a module
//     in one NVRTC run.
#pragma once
#include "targets/gpu/gpu_options.hpp"

#include <kiln/module.hpp>
#include <kiln/pass.hpp>

#include <string>

namespace kiln::gpu {

pass make_fusion_pass(const gpu_options& o);

struct fuse_attention {
    const gpu_options* options = nullptr;  // the gpu context's (it outlives the passes)
    std::string name() const { return "gpu::fuse_attention"; }
    void apply(module& m) const;
};

struct lowering {
    const gpu_options* options = nullptr;  // the gpu context's (it outlives the passes)
    std::string name() const { return "gpu::lowering"; }
    void apply(module& m) const;
};

}  // namespace kiln::gpu
