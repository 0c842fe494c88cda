// cpu::dyn_pad: a generic program's constant Pad of float32 (pads known only when it runs)
// as a fill and one block copy per row of the input, in the order the input is stored (a
// channels-last input gives a channels-last result); pads of zero return the input itself.
//
// Why: the reference kernel maps every output element back through its coordinates:
// Swin pads each stage's activations up to a multiple of its window with amounts computed
// from the shape (pad_dynamic), 15% of swin_t's generic call at 160x192 (8 ms); at sizes
// the window divides, the pads are zero and the copy was for nothing. Other modes (reflect,
// edge, wrap), cropping pads and other element types run the reference op.
//
// Operands: the IR op's (pad: x[, value]; pad_dynamic: x, pads[, value][, axes]).
#pragma once
#include <kiln/argument.hpp>
#include <kiln/context.hpp>
#include <kiln/instruction.hpp>
#include <kiln/operation.hpp>

#include <string>
#include <vector>

namespace kiln::cpu {

struct lower_env;

struct dyn_pad {
    operation op;  // op::pad (pads fixed) or op::pad_dynamic (read when it runs)

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
    }
    std::string name() const { return "cpu::dyn_pad"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const { return op.compute_shape(inputs); }
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
};

// A generic program's float32 pad or pad_dynamic (a dynamic input) -> cpu::dyn_pad.
bool lower_dyn_pad(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
