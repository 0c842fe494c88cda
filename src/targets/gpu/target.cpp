// The gpu target (CUDA). This first step compiles: its passes turn a program into
// generated CUDA kernels (compiled by NVRTC to CUBIN and PTX), cuBLASLt products with
// planned workspaces, and reference kernels for the rest, without a device. Running on a
// device (the arena in device memory, copies, launches through the runtime API, cuDNN)
// is issue 21's next step; until then the target reports itself unavailable wherever no
// device is found (compiling still works there), and its kernels say they cannot run yet.
#include "targets/gpu/availability.hpp"
#include "targets/gpu/codegen/compile_pass.hpp"
#include "targets/gpu/context.hpp"
#include "targets/gpu/lowering.hpp"

#include <kiln/pipeline.hpp>
#include <kiln/target.hpp>

namespace kiln::gpu {

namespace {

class gpu_target final : public target {
public:
    std::string name() const override { return "gpu"; }
    std::string unavailable_reason() const override { return gpu::unavailable_reason(); }
    // NVRTC needs no device: programs compile anywhere (`kiln compile --gpu-arch sm_90`);
    // gpu_context::begin_run refuses to run them where there is no device.
    std::string compile_unavailable_reason() const override { return {}; }
    std::shared_ptr<context> make_context(const compile_options& opts) const override {
        return std::make_shared<gpu_context>(opts);
    }
    std::vector<pass> get_passes(context& ctx, const compile_options& opts) const override {
        const gpu_options& o = dynamic_cast<gpu_context&>(ctx).options();
        std::vector<pass> passes;
        // 1. Elementwise chains into fused groups (gpu rules, lowering.hpp).
        passes.push_back(make_fusion_pass(o));
        // 2. The candidates of selection.cpp: generated kernels, cuBLASLt.
        passes.push_back(lowering{&o});
        // 3. What no candidate took runs on the reference kernels: the ref target's lowering
        //    (its memory planning left out; it comes last).
        compile_options fallback = opts;
        fallback.memory_planning = false;
        for (auto& p : get_target("ref")->get_passes(ctx, fallback)) passes.push_back(std::move(p));
        // 4. The generated kernels through NVRTC, one run per module.
        passes.push_back(codegen::compile_kernels{&o});
        passes.push_back(make_pass("dead_code_elimination"));
        // 5. One arena for every buffer, library workspaces included.
        if (opts.memory_planning) {
            passes.push_back(make_pass("schedule"));
            passes.push_back(make_pass("memory_coloring"));
        }
        return passes;
    }
};

const bool registered = [] {
    register_target(std::make_shared<gpu_target>());
    return true;
}();

}  // namespace

}  // namespace kiln::gpu
