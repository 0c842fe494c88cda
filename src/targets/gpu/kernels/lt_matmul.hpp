// gpu::lt_matmul: a float32 matrix product (matmul, or gemm without its C term) on
// cuBLASLt, in destination-passing style: inputs (a, b, workspace, output). The workspace
// is an ordinary `allocate` the lowering inserts, so memory planning places it in the
// arena with everything else and eval allocates nothing.
//
// cuBLASLt's algorithm is chosen on the device (heuristics, or timing under
// exhaustive_tune) when the program first loads on one; that, and running it, land with
// the device runtime (issue 21), so for now compute() says so.
#pragma once
#include <kiln/operation.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::gpu {

struct lt_matmul {
    bool trans_a = false;
    bool trans_b = false;
    float alpha = 1.0f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.trans_a, "trans_a");
        f(self.trans_b, "trans_b");
        f(self.alpha, "alpha");
    }
    std::string name() const { return "gpu::lt_matmul"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// cuBLASLt's workspace: 32 MiB, what NVIDIA recommends for Hopper.
inline constexpr std::size_t lt_workspace_bytes = std::size_t{32} << 20;

}  // namespace kiln::gpu
