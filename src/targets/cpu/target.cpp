// The cpu target: oneDNN primitives for compute-bound ops, generated fused kernels
// for memory-bound chains, and the reference kernels for everything else (so any
// program runs, and `kiln perf --per-instruction` shows what still runs on ref code).
#include "targets/cpu/bf16_activations.hpp"
#include "targets/cpu/codegen/lowering.hpp"
#include "targets/cpu/codegen/spell_out_generic_norms.hpp"
#include "targets/cpu/codegen/spell_out_instance_norm.hpp"
#include "targets/cpu/codegen/spell_out_softmax.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/deconv_as_conv.hpp"
#include "targets/cpu/dequantize_without_vnni.hpp"
#include "targets/cpu/lowering.hpp"
#include "targets/cpu/fp8_weights.hpp"
#include "targets/cpu/widen_reduced.hpp"

#include <kiln/pipeline.hpp>

#include <string>
#include <kiln/target.hpp>

namespace kiln::cpu {

namespace {

class cpu_target final : public target {
public:
    std::string name() const override { return "cpu"; }
    std::shared_ptr<context> make_context(const compile_options& opts) const override {
        return std::make_shared<cpu_context>(opts);
    }
    std::shared_ptr<context> derive_context(const context& parent, const compile_options& opts) const override {
        if (const auto* cpu = dynamic_cast<const cpu_context*>(&parent)) return std::make_shared<cpu_context>(*cpu, opts);
        return make_context(opts);
    }
    std::vector<pass> get_passes(context& ctx, const compile_options& opts) const override {
        auto& cpu = dynamic_cast<cpu_context&>(ctx);
        const cpu_options& o = cpu.options();
        std::vector<pass> passes;
        // 16-bit float computations in float32, on the float32 kernels (widen_reduced.hpp).
        passes.push_back(widen_reduced_precision{&cpu});
        // float8 weights dequantized once, here (fp8_weights.hpp).
        passes.push_back(fold_fp8_weights{});
        // Transposed convolutions whose kernel tiles the output as 1x1 convolutions and a
        // depth_to_space: oneDNN's deconvolution is ten times slower (deconv_as_conv.hpp).
        if (o.dnnl) passes.push_back(deconvolution_as_convolution{});
        // 0. A batched CNN's first layers image by image, where one image's activations
        //    stay in the caches and the batch's do not (passes/split_batch.hpp);
        //    on with AVX-512 only; KILN_CPU_SPLIT_BATCH=0|1 decides instead (cpu_options).
        if (o.split_batch) passes.push_back(make_pass("split_batch"));
        // 0b. Without a VNNI int8 dot product, quantized models' integer ops back to float
        //    (dequantize_without_vnni.hpp): oneDNN's int8 kernels would saturate there;
        //    except what Kiln's own exact int8 kernels take (selection.cpp).
        if (o.dnnl && o.int8_kernels != int8_kernel_choice::onednn_everywhere) passes.push_back(dequantize_without_vnni{o});
        // 1. Elementwise chains and reductions into fused groups; the ops oneDNN takes as
        //    post-ops of a convolution or matmul are left out of the groups (codegen/reserve).
        //    A generic program's softmax is spelled out first, for one fused kernel over
        //    run-time sizes (codegen/spell_out_softmax.hpp); every instance norm too, which
        //    has no other cpu kernel (codegen/spell_out_instance_norm.hpp), and a generic
        //    program's batch and layer norms (codegen/spell_out_generic_norms.hpp).
        if (o.fusion) passes.push_back(codegen::spell_out_softmax{&o});
        if (o.fusion) passes.push_back(codegen::spell_out_instance_norm{});
        if (o.fusion) passes.push_back(codegen::spell_out_generic_norms{});
        passes.push_back(codegen::make_fusion_pass(o));
        // 2. oneDNN primitives and Kiln's kernels for what they cover (with fused post-ops),
        //    activations in the layouts oneDNN chooses around convolutions: seven named
        //    passes (lowering.hpp). KILN_CPU_DNNL=0 leaves everything to the generated and
        //    reference kernels (for measuring and testing the generated kernels on their
        //    own, as KILN_CPU_FUSION=0 does for grouping).
        if (o.dnnl)
            for (auto& p : lowering_passes(cpu)) passes.push_back(std::move(p));
        // 3. One generated kernel per fused group.
        passes.push_back(codegen::lowering{&o});
        // 4. Whatever the lowerings did not claim runs on the reference kernels: the ref
        //    target's lowering, through the target interface (its memory planning left out,
        //    it comes below).
        compile_options fallback = opts;
        fallback.memory_planning = false;
        for (auto& p : get_target("ref")->get_passes(ctx, fallback)) passes.push_back(std::move(p));
        // Activations from one bf16 convolution to the next in bf16 (bf16_activations.hpp):
        // after every lowering has made its readers, before memory planning sizes them.
        passes.push_back(keep_bf16_activations{&cpu});
        // Identical constants stored once (split_batch's copies each stored their own
        // reordered weights).
        passes.push_back(make_pass("merge_literals"));
        // The lowerings leave the original weight literals behind when they store reordered
        // copies (oneDNN layouts, padded rows): drop whatever nothing reads any more.
        passes.push_back(make_pass("dead_code_elimination"));
        if (opts.memory_planning) {
            passes.push_back(make_pass("schedule"));  // orders buffers for a smaller arena
            passes.push_back(make_pass("memory_coloring"));
        }
        return passes;
    }
};

const bool registered = [] {
    register_target(std::make_shared<cpu_target>());
    return true;
}();

}  // namespace

}  // namespace kiln::cpu
