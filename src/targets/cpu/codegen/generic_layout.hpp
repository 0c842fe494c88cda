// Fused elementwise kernels for a generic program (dims known only when it runs).
//
// Why: a generic program (src/core/dynamic_program.cpp) serves every shape the model
// accepts; before, its elementwise ops ran the reference kernels one op at a time on one
// thread (bert_small at 128 tokens: GELU's erf alone 3 ms of 17). Compiling a kernel per
// shape is what specializations do; this compiles one kernel per group for every shape.
//
// The kernel's loop structure is fixed at compile time from the symbolic shapes, its
// sizes and strides come per call in a geometry array:
//   * the domain's dims (the result's; for a reduction group, its reductions' input) form
//     groups of neighbours that every tensor reads the same way (all along them, or all
//     broadcast: a dim a tensor lacks or has as a fixed 1); dims of a fixed length 1 join
//     the group after them (or the last one); a reduction group's reduced dims (trailing
//     ones) are one group of their own, the last;
//   * the last group is the kernel's inner loop (vectorized: each input read at a unit
//     stride or as one broadcast value; in a reduction group, each row's loops), the
//     others are outer dims with run-time lengths and strides.
// Per call, `generic_geometry` checks that the arguments fit that structure (a dim the
// symbolic shapes said was read along may be 1 and broadcast at run time; a view may
// have strides that do not merge) and fills the array; when they do not fit, the views
// among them are copied into the kernel's walk order and checked again (fused_kernel::
// compute_generic), and what still does not fit runs the reference computation instead
// (always correct, only slower).
#pragma once
#include "targets/cpu/codegen/shared.hpp"

#include <kiln/shape.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu::codegen {

struct generic_layout {
    std::vector<std::int64_t> group_of;  // per domain dim (in the walk order): its group, non-decreasing
    // Per input and then the output, per group (tensor-major): 1 read along it, 0 broadcast.
    std::vector<std::int64_t> along;
    std::int64_t groups = 0;   // 0: not a generic kernel
    std::int64_t reduced = 0;  // trailing domain dims the group's reductions reduce (the last group); 0: elementwise
    // The order the kernel walks the domain's dims in, outermost first (empty: as they
    // are); group_of and along are per position in it. (0, 2, 3, 1) walks a 4-D group
    // channels-last: cpu::dyn_primitive's results, read at unit stride, and the result
    // laid out so as well.
    std::vector<std::int64_t> order;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.group_of, "group_of");
        f(self.along, "along");
        f(self.groups, "groups");
        f(self.reduced, "reduced");
        f(self.order, "order");
    }
    bool empty() const { return groups == 0; }
    std::size_t inputs() const { return groups == 0 ? 0 : along.size() / static_cast<std::size_t>(groups) - 1; }
    // Tensor `t` (inputs(): the output) reads along group k.
    bool reads_along(std::size_t t, std::size_t k) const {
        return along[t * static_cast<std::size_t>(groups) + k] != 0;
    }
    // Longs in the geometry array: the last group's length (the inner loop), the other
    // groups' lengths, then per input and for the output their strides.
    std::size_t geometry_size() const {
        const std::size_t outer = static_cast<std::size_t>(groups) - 1;
        return 1 + outer * (inputs() + 2);
    }
    friend bool operator==(const generic_layout&, const generic_layout&) = default;
};

// Whether a fused kernel can hold `ins` in a generic program: an elementwise op or a
// reduction over trailing axes (is_fusible_dynamic_reduction) with a dynamic result,
// whose op and element types the kernels handle.
bool generic_kernel_can_run(instruction_ref ins);

// The layout of a group with these (dynamic) input and output shapes whose reductions
// reduce the last `reduced` dims (0: elementwise). Throws `unsupported` when an input reads
// some reduced dims and not others.
generic_layout make_generic_layout(const std::vector<shape>& inputs, const shape& output, std::size_t reduced,
                                   const std::vector<std::int64_t>& order = {});

// The group's nodes analysed for one static instance of these shapes (each dynamic dim at
// a size that fits the others): what the kernel computes, without its geometry. Throws
// `unsupported` as make_plan does.
plan sample_plan(const op::fused& body, const std::vector<shape>& inputs, const shape& output, bool fast_math);

// The result's shape for these arguments as the layout sees it (type `t`): the longest
// len each dim has among them (their broadcast, when they broadcast at all), 1 where the
// result does not read along; row-major in the walk order.
shape generic_result_shape(const generic_layout& l, const std::vector<shape>& args, type t);

// The geometry of one call (`out` is the result's static shape, row-major), or false when
// the arguments do not fit the layout.
bool generic_geometry(const generic_layout& l, const std::vector<shape>& args, const shape& out,
                      std::vector<long>& geometry);

}  // namespace kiln::cpu::codegen
