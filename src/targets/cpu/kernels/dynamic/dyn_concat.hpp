// cpu::dyn_concat: a generic program's Concat (sizes known only when it runs), as block
// copies in the order its inputs are stored.
//
// Why: a generic program's concat ran the reference kernel, one element at a time through
// its strides: torchvision's densenet121 spent 16.6 of its 69 ms a call (62 concats of
// channels-last convolution results), squeezenet1_1 a fifth of its time. When every input
// is packed in one memory order (the channels-last results of cpu::dyn_primitive, or
// row-major ones), the result is written in that order too, so that the convolution or
// the generated kernel after it reads it without a reorder: each input is then one block
// per index of the dims stored before the axis (a pixel's channels, channels-last). Inputs
// stored otherwise are copied element-wise into a row-major result.
//
// Operands: the inputs; the result is allocated per call.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/context.hpp>
#include <kiln/instruction.hpp>
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct lower_env;

struct dyn_concat {
    std::int64_t axis = 0;  // normalized

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
    }
    std::string name() const { return "cpu::dyn_concat"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
};

// A generic program's concat (a dynamic result) -> cpu::dyn_concat.
bool lower_dyn_concat(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
