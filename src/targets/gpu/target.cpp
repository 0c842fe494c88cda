// The gpu target (CUDA). Its passes turn a program into generated CUDA kernels (compiled
// by NVRTC to CUBIN and PTX), cuBLASLt products with planned workspaces, and reference
// kernels on the host for the rest (host_fallback.hpp), without a device. On a device its
// buffers are device memory: the arena (one cudaMalloc per concurrent eval, kept for the
// next), literals uploaded once at finalize, inputs and outputs copied on the context's
// stream with offload_copy, else the caller's device pointers. Where no device is found
// the target says so (compiling still works there).
#include "targets/gpu/availability.hpp"
#include "targets/gpu/codegen/compile_pass.hpp"
#include "targets/gpu/context.hpp"
#include "targets/gpu/device.hpp"
#include "targets/gpu/host_fallback.hpp"
#include "targets/gpu/lowering.hpp"
#include "targets/gpu/split_conv_bias.hpp"

#include "passes/memory_coloring.hpp"

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
        // 1. Convolutions' biases out of them (cuDNN computes the product, a generated
        //    kernel the bias and what follows), attention as one kernel each, then
        //    elementwise chains into fused groups (gpu rules, lowering.hpp).
        passes.push_back(split_conv_bias{&o});
        passes.push_back(fuse_attention{&o});
        passes.push_back(make_fusion_pass(o));
        // 2. The candidates of selection.cpp: generated kernels, cuBLASLt.
        passes.push_back(lowering{&o});
        // 3. What no candidate took runs on the reference kernels: the ref target's lowering
        //    (its memory planning left out; it comes last).
        compile_options fallback = opts;
        fallback.memory_planning = false;
        for (auto& p : get_target("ref")->get_passes(ctx, fallback)) passes.push_back(std::move(p));
        // 4. What stays on the host (reference kernels between copies) and the literal
        //    upload (host_fallback.hpp).
        passes.push_back(place_host_ops{});
        // 5. The generated kernels through NVRTC, one run per module.
        passes.push_back(codegen::compile_kernels{&o});
        passes.push_back(make_pass("dead_code_elimination"));
        // 6. One arena for every buffer, library workspaces included.
        //    The results too (plan_results): every buffer of an eval then has a fixed
        //    address in its arena, so the eval can be replayed as a CUDA graph
        //    (eval_graphs.hpp); they are copied out of the arena anyway.
        if (opts.memory_planning) {
            passes.push_back(make_pass("schedule"));
            passes.push_back(memory_coloring{.alignment = 256, .plan_results = true});
        }
        // 7. What planning left (all buffers, without planning) in device memory per eval.
        passes.push_back(device_allocations{});
        return passes;
    }

    memory_location location() const override { return memory_location::device; }
    // The arena of an eval (program.cpp's arena_pool keeps it for the next one).
    argument allocate(const shape& s, context& ctx) const override {
        return device_allocate(s, gpu_context_of(ctx, "gpu arena"), "the arena " + s.to_string());
    }
    // offload_copy's inputs, or a device result copied out of the arena (device to device).
    argument copy_to_target(const argument& a, context& ctx) const override {
        auto& g = gpu_context_of(ctx, "gpu copy");
        if (a.get_shape().is_tuple()) {
            std::vector<argument> e;
            for (const auto& x : a.elements()) e.push_back(copy_to_target(x, ctx));
            return argument::make_tuple(std::move(e));
        }
        const std::string what = "an input " + a.get_shape().to_string();
        if (a.location() == memory_location::device) return device_copy(a, g, what);
        return upload(a, g, what);
    }
    // offload_copy's inputs of an eval with an arena: through pinned staging into device
    // buffers kept per (arena, input), so a CUDA graph of the eval finds them again.
    argument copy_input_to_target(const std::string& name, const argument& a, const argument& arena,
                                  context& ctx) const override {
        const auto& s = a.get_shape();
        if (arena.empty() || !arena.data() || a.location() == memory_location::device || !s.is_tensor() ||
            s.dynamic() || s.get_type() == type::string)
            return copy_to_target(a, ctx);
        return gpu_context_of(ctx, "gpu copy").staged_input(name, a, arena.data());
    }
    // offload_copy's outputs: host memory, after the queued work is done.
    argument copy_to_host(const argument& a, context& ctx) const override {
        if (a.get_shape().is_tuple()) {
            std::vector<argument> e;
            for (const auto& x : a.elements()) e.push_back(copy_to_host(x, ctx));
            return argument::make_tuple(std::move(e));
        }
        if (a.location() != memory_location::device) return a;
        return download(a, gpu_context_of(ctx, "gpu copy"), "an output " + a.get_shape().to_string());
    }
};

const bool registered = [] {
    register_target(std::make_shared<gpu_target>());
    return true;
}();

}  // namespace

}  // namespace kiln::gpu
