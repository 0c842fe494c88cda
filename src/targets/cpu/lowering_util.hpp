// Helpers the lowering files share: emitting a cpu:: op with its buffers, layouts.
#pragma once
#include "targets/cpu/context.hpp"
#include "targets/cpu/dnnl_util.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/module.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

struct lower_env {
    module& m;
    cpu_context& ctx;
};

// Packed strides for `lens`, nesting the dims in the order of `ref`'s strides
// (outermost first; ties keep dim order), e.g. channels-last stays channels-last.
std::vector<std::size_t> strides_like(const shape& ref, const std::vector<std::size_t>& lens);
// A packed shape with x's lens in x's dim order (row-major when x is not packed).
shape packed_like(const shape& x);
// x's lens in channels-last layout (row-major for rank < 3).
shape channels_last(const shape& x);

// Inserts before `pos` a cpu::reorder of x into `layout` (same lens and type).
instruction_ref insert_reorder(lower_env& env, instruction_ref pos, instruction_ref x, const shape& layout);
// x in `layout`: x itself when it already is, else a reorder.
instruction_ref ensure_layout(lower_env& env, instruction_ref pos, instruction_ref x, const shape& layout);

// The scratchpad size of a primitive desc (bytes).
inline std::size_t scratchpad_bytes(const dnnl::primitive_desc_base& pd) { return pd.scratchpad_desc().get_size(); }

// Replaces `ins` by `op` over `operands`, with a planned scratchpad (when the primitive
// needs one) and output buffer `dst`. Returns false, changing nothing, when oneDNN has no
// kernel for it (the op then stays for the reference kernels).
template <class Op>
bool emit(lower_env& env, instruction_ref ins, Op op, std::vector<instruction_ref> operands, const shape& dst) {
    std::size_t scratch = 0;
    try {
        auto pd = op.make_pd(env.ctx.engine(), to_shapes(operands), dst);
        scratch = scratchpad_bytes(pd);
    } catch (const dnnl::error&) {
        return false;
    } catch (const error& e) {
        if (e.code() == error_code::unsupported) return false;
        throw;
    }
    auto args = operands;
    op.scratchpad = -1;
    if (scratch > 0) {
        op.scratchpad = static_cast<std::int64_t>(args.size());
        args.push_back(env.m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {scratch})}, {}));
    }
    args.push_back(env.m.insert_instruction(ins, builtin::allocate{dst}, {}));
    env.m.replace_instruction(ins, op, args);
    return true;
}

// Lowers a non-anchor op (pooling, softmax, layer_norm, batch_norm, lrn, reductions,
// concat, resize, eltwise, binary); false when it stays on the reference kernels.
bool lower_simple(lower_env& env, instruction_ref ins);
// Lowers an ONNX LSTM whose Y alone is used (op_rnn.cpp); the instructions it leaves
// dead (the tuple and its unused elements) go to `dead`, removed after the walk.
bool lower_lstm(lower_env& env, instruction_ref ins, std::vector<instruction_ref>& dead);

}  // namespace kiln::cpu
