// cpu::dyn_primitive: a float32 convolution or pooling whose input sizes are known only
// when it runs (an instruction of a generic program: a dynamic batch, or an image's own
// height and width), on oneDNN. A mean over every spatial axis (ReduceMean over [2, 3]) is
// taken as the global average pooling it is.
//
// Why: cpu::convolution and cpu::pooling plan one oneDNN primitive (and the weights'
// layout) for one shape at compile time, and the reference kernels are naive loops, tens
// to hundreds of times slower. A dynamic one creates the oneDNN primitive for each input
// shape on the first call with that shape and keeps it (at most `max_cached` shapes per
// instruction, the least recently used dropped), with the weights reordered into the
// layout the primitive wants once per layout. So a CNN with a dynamic batch compiles once
// and runs every batch size at oneDNN's speed, paying a primitive creation (well under a
// millisecond per layer) the first time a size comes.
//
// Operands: (x[, w[, b]], post-op inputs...): w and b (convolution) are constants. The
// result is written channels-last (its IR dims with NHWC strides: the layout whose oneDNN
// kernels are fast for every batch size and that needs no padding to a channel block);
// x and the binary post-ops' inputs in another order are reordered into it first. Post-ops
// are eltwise (relu, clip, ...) and binary ones that read an operand with the result's
// dims (a residual add). A shape oneDNN has no primitive for runs the IR op's reference
// kernel.
#pragma once
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/dynamic/shape_cache.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include <kiln/operation.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

// One shape's primitive of a cpu::dyn_primitive.
struct dyn_primitive_entry {
    std::string key;                  // the operands' dims and strides, and the weights' address
    std::optional<dnnl::primitive> prim;  // none: the reference kernel runs this shape
    dnnl::memory::desc src, dst, weights, bias;
    std::vector<dnnl::memory::desc> post_inputs;  // binary post-ops' src1, in chain order
    // x, then the binary post-ops' inputs: as they come, and the reorder into
    // channels-last when they come in another order.
    std::vector<dnnl::memory::desc> given;
    std::vector<std::optional<dnnl::reorder>> to_channels_last;
    dnnl::memory reordered_weights;  // empty: the weights are read in place
    std::size_t scratch = 0;
};
using dyn_primitive_cache = shape_cache<dyn_primitive_entry>;

struct dyn_primitive {
    operation op;  // op::convolution or op::pooling (max or average)
    bool has_bias = false;
    std::vector<post_op> post_ops;
    // The per-shape primitives; shared by copies of the op (not saved: rebuilt on use).
    std::shared_ptr<dyn_primitive_cache> cache = std::make_shared<dyn_primitive_cache>();

    static constexpr std::size_t max_cached = 16;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
    }
    std::string name() const { return "cpu::dyn_primitive"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    // The IR op's operands (x, w, b): the others are post-op inputs.
    std::size_t ir_operands() const;
    // The number of shapes whose primitive is cached (tests).
    std::size_t cached_shapes() const;
};

// Lowers every dynamic float32 convolution with constant weights, and every dynamic max
// or average pooling, to a cpu::dyn_primitive; a convolution takes the relu/clip/SiLU and the
// residual add that follow it (each read only by the next) as post-ops. What it does not
// take stays as it is.
void lower_dyn_primitives(lower_env& env);
// The instructions after `ins` that lower_dyn_primitives takes into its primitive as
// post-ops (empty when it takes none, or does not take `ins`): the fusion pass leaves
// them out of its groups (codegen::post_op_chains).
std::vector<instruction_ref> dyn_primitive_post_ops(instruction_ref ins);

}  // namespace kiln::cpu
