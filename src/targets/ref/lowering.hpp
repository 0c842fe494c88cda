// The ref target's lowering: every op keeps its reference compute, but writes into an
// explicit output buffer (destination-passing style) so memory planning applies to
// ref exactly as to the fast targets.
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln::ref {

// Runs the wrapped op's reference compute and copies the result into the last input
// (the planned buffer).
struct kernel {
    operation op;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.op, "op"); }
    std::string name() const { return "ref::kernel"; }
    // The wrapped op's side effects and randomness still hold (passes after lowering,
    // e.g. schedule, keep such ops in order); its other traits describe the bare op.
    op_traits traits() const {
        auto t = op.traits();
        return {.nondeterministic = t.nondeterministic, .side_effects = t.side_effects};
    }
    shape compute_shape(std::vector<shape> inputs, const std::vector<module_ref>& mods) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    // The wrapped op builds its kernels as it would unwrapped: this lowering also wraps a
    // target's op that an earlier lowering left without an output buffer (a generic program's
    // attention whose result is static, one query row over a cache of any length).
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs,
                  const std::vector<argument>& constants);
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

struct lowering {
    std::string name() const { return "ref::lowering"; }
    void apply(module& m) const;
};

}  // namespace kiln::ref
