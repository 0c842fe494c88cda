// The gpu target (CUDA): registered, with its options and the reason it cannot run here.
// Its own lowering comes next; until then every op stays on the reference kernels.
#include "targets/gpu/availability.hpp"
#include "targets/gpu/context.hpp"

#include <kiln/pipeline.hpp>
#include <kiln/target.hpp>

namespace kiln::gpu {

namespace {

class gpu_target final : public target {
public:
    std::string name() const override { return "gpu"; }
    std::string unavailable_reason() const override { return gpu::unavailable_reason(); }
    std::shared_ptr<context> make_context(const compile_options& opts) const override {
        return std::make_shared<gpu_context>(opts);
    }
    std::vector<pass> get_passes(context& ctx, const compile_options& opts) const override {
        return get_target("ref")->get_passes(ctx, opts);
    }
};

const bool registered = [] {
    register_target(std::make_shared<gpu_target>());
    return true;
}();

}  // namespace

}  // namespace kiln::gpu
