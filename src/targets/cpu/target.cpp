// The cpu target: oneDNN primitives for compute-bound ops, generated fused kernels
// for memory-bound chains, and the reference kernels for everything else (so any
// program runs, and `kiln perf --per-instruction` shows what still runs on ref code).
#include "targets/cpu/codegen/lowering.hpp"
#include "targets/cpu/context.hpp"
#include "targets/ref/lowering.hpp"

#include <kiln/pipeline.hpp>
#include <kiln/target.hpp>

namespace kiln::cpu {

namespace {


class cpu_target final : public target {
public:
    std::string name() const override { return "cpu"; }
    std::shared_ptr<context> make_context(const compile_options& opts) const override {
        return std::make_shared<cpu_context>(opts);
    }
    std::vector<pass> get_passes(context&, const compile_options& opts) const override {
        std::vector<pass> passes;
        // Elementwise chains and reductions into fused groups, then one generated kernel each.
        passes.push_back(codegen::make_fusion_pass(opts));
        passes.push_back(codegen::lowering{opts.fast_math});
        // Whatever the cpu lowering did not claim runs on the reference kernels.
        passes.push_back(ref::lowering{});
        if (opts.memory_planning) passes.push_back(make_pass("memory_coloring"));
        return passes;
    }
};

const bool registered = [] {
    register_target(std::make_shared<cpu_target>());
    return true;
}();

}  // namespace

}  // namespace kiln::cpu
