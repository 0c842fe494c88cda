// The reference target: the oracle other targets are verified against. It runs each
// op's straightforward reference compute; its only compile work is lowering to
// explicit output buffers and planning them into one arena.
#include "targets/ref/lowering.hpp"

#include <kiln/pipeline.hpp>
#include <kiln/target.hpp>

namespace kiln::ref {

class ref_target final : public target {
public:
    std::string name() const override { return "ref"; }
    std::shared_ptr<context> make_context(const compile_options&) const override {
        return std::make_shared<host_context>();
    }
    std::vector<pass> get_passes(context&, const compile_options& opts) const override {
        std::vector<pass> passes{lowering{}};
        if (opts.memory_planning) {
            passes.push_back(make_pass("schedule"));  // orders buffers for a smaller arena
            passes.push_back(make_pass("memory_coloring"));
        }
        return passes;
    }
};

namespace {
const bool registered = [] {
    register_target(std::make_shared<ref_target>());
    return true;
}();
}  // namespace

}  // namespace kiln::ref
