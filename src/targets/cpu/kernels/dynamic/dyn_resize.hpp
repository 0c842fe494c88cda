// cpu::dyn_resize: a generic program's float32 Resize (sizes known only when it runs), with
// the reference op's taps (op::make_taps, ONNX's semantics for every mode) summed in float32
// over the two last axes, one output pixel's channels at a time when the input is
// channels-last (the result is then channels-last too), one plane at a time otherwise.
//
// Why: the reference kernel sums in double, one element at a time, after copying a
// channels-last input row-major: torchvision's lraspp_mobilenet_v3_large spent 8.5 of its
// 17 ms a call (generic) in it, deeplabv3 a quarter; the static programs run oneDNN's
// resampling, made for one shape. Resizes over other axes, a crop-and-resize roi, or an
// element type other than float32 run the reference op as before.
//
// Operands: the IR op's (x[, roi], scales or sizes for resize_dynamic).
#pragma once
#include <kiln/argument.hpp>
#include <kiln/context.hpp>
#include <kiln/instruction.hpp>
#include <kiln/operation.hpp>

#include <string>
#include <vector>

namespace kiln::cpu {

struct lower_env;

struct dyn_resize {
    operation op;  // op::resize (scales or sizes fixed) or op::resize_dynamic (read when it runs)

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
    }
    std::string name() const { return "cpu::dyn_resize"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const { return op.compute_shape(inputs); }
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
};

// A generic program's float32 resize or resize_dynamic (a dynamic input) -> cpu::dyn_resize.
bool lower_dyn_resize(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
