// cpu::concat_plain: Concat of row-major float32 tensors along any axis, as one block copy
// per input and outer index (everything before the axis) into the planned output buffer.
//
// Why not oneDNN: its 2.6 concat of plain tensors (simple:any) takes 44 us for vit_tiny's
// class token and 196 patch rows (151 KiB) on a Zen 5 EPYC, 2 threads, where the copies
// take a few. Inputs in oneDNN's blocked layouts still go to oneDNN's concat.
//
// Inputs: (x..., output buffer).
#pragma once
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct concat_plain {
    std::int64_t axis = 0;  // normalized
    // Each input's length along the axis (its buffer's shape may be a producer's raw
    // bytes: a kernel that wrote in place); empty in programs saved before it was kept.
    std::vector<std::int64_t> sizes;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.sizes, "sizes");
    }
    std::string name() const { return "cpu::concat_plain"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::size_t along(const std::vector<argument>& args, std::size_t i) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
};

// Replaces a concat of row-major float32 tensors (none in a oneDNN layout) by a
// cpu::concat_plain; false, changing nothing, otherwise.
bool lower_concat_plain(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
