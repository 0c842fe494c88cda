// Running a lowered gpu program: what stays on the host, and what goes to the device once.
//
// gpu::place_host_ops (after the ref target's lowering, before compile_kernels and memory
// planning) leaves device work as it is (gpu::fused_kernel, gpu::lt_matmul, the arena's
// allocate/load) and the views that only re-describe device memory (reshape, flatten,
// squeeze, unsqueeze, transpose, broadcast, slice: static shapes, output aliasing input
// 0), and turns everything else into gpu::host_kernel: the reference kernels (ref::kernel)
// and any other op run on the host, their device inputs copied to host memory first and
// their result copied into a planned device buffer after, so the next instruction finds it
// on the device. Literals that device work reads get a gpu::device_literal: the literal
// uploaded once, when the program is finalized on a device (the "literal upload" step);
// host kernels read the literal itself. gpu::device_allocations, after memory planning,
// makes the `allocate`s it left gpu::allocate (device memory per eval). Control flow (ops with sub-modules) does not run
// on the gpu target yet: the pass says so at compile time.
#pragma once
#include <kiln/module.hpp>
#include <kiln/operation.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kiln::gpu {

struct host_kernel {
    operation op;
    bool buffer = false;  // the last input is the device buffer the result is copied into
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.buffer, "buffer");
    }
    std::string name() const { return "gpu::host_kernel"; }
    // The wrapped op's randomness and side effects; without a buffer (dynamic or non-tensor
    // results) also how it handles dynamic shapes.
    op_traits traits() const {
        auto t = op.traits();
        return {.nondeterministic = t.nondeterministic,
                .side_effects = t.side_effects,
                .handles_dynamic = !buffer && t.handles_dynamic};
    }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return buffer ? static_cast<std::ptrdiff_t>(inputs.size()) - 1 : -1;
    }
};

// A literal (input 0) in device memory: uploaded by finalize on a device, once.
struct device_literal {
    std::shared_ptr<argument> uploaded;  // not saved
    template <class Self, class F>
    static void reflect(Self&, F) {}
    std::string name() const { return "gpu::device_literal"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& output, const std::vector<shape>& inputs,
                  const std::vector<argument>& constants);
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
};

// `allocate` of an unplanned gpu program: device memory for one eval.
struct gpu_allocate {
    shape s;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.s, "shape"); }
    std::string name() const { return "gpu::allocate"; }
    shape compute_shape(const std::vector<shape>&) const { return s; }
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
};

// Whether `ins` (a static view of the listed kinds) runs as it is on device memory.
bool device_view(instruction_ref ins);

struct place_host_ops {
    std::string name() const { return "gpu::place_host_ops"; }
    void apply(module& m) const;
};

// Last in the pipeline: every `allocate` memory planning left (the returned results', or
// all of them without planning) becomes gpu::allocate, device memory per eval; a plain
// allocate would give the kernels host memory.
struct device_allocations {
    std::string name() const { return "gpu::device_allocations"; }
    void apply(module& m) const;
};

}  // namespace kiln::gpu
