// Helpers the lowering files share: emitting a cpu:: op with its buffers, and the
// layouts of activations (oneDNN's blocked layouts, and reorders at their boundaries).
#pragma once
#include "targets/cpu/context.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"

#include "passes/merge_literals.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/module.hpp>

#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::cpu {

struct lower_env {
    module& m;
    cpu_context& ctx;
    // Instructions whose result is in a oneDNN layout (their IR shape is the logical
    // row-major one), and the row-major copies made of them.
    std::unordered_map<const instruction*, md_record> layout;
    std::unordered_map<const instruction*, instruction_ref> plain_copy;
    // Convolutions to plan in 16-channel blocks rather than oneDNN's choice (lowering.cpp:
    // blocked_for_depthwise_fusion).
    std::unordered_set<const instruction*> blocked;
    // The constants the lowering made (reordered and packed weights), by content: a
    // program with copies of one layer (split_batch) stores, and holds while compiling,
    // each once.
    literal_index constants;
    // A literal with l's value before pos: an equal one made earlier, or a new one.
    instruction_ref constant(instruction_ref pos, literal l);
    // The constant `make()` derives from literal `source` in the way `how` names (a
    // weight layout, a packing), made once: copies of a layer (split_batch) reuse it
    // instead of transforming the same weights again.
    std::unordered_map<const instruction*, std::unordered_map<std::string, instruction_ref>> derived;
    template <class Make>
    instruction_ref derive(instruction_ref pos, instruction_ref source, const std::string& how, Make make) {
        auto& made_from = derived[&*source];
        if (auto it = made_from.find(how); it != made_from.end()) return it->second;
        auto made = constant(pos, make());
        made_from.emplace(how, made);
        return made;
    }
    // Before `source` is removed: its address may come back for another literal.
    void forget_derived(instruction_ref source) { derived.erase(&*source); }
    // Instructions a lowering left dead that must go before the walk ends (an LSTM's tuple
    // and its unused elements: users before what they use).
    std::vector<instruction_ref> dead;
};

// Packed strides for `lens`, nesting the dims in the order of `ref`'s strides
// (outermost first; ties keep dim order).
std::vector<std::size_t> strides_like(const shape& ref, const std::vector<std::size_t>& lens);
// A packed shape with x's lens in x's dim order (row-major when x is not packed).
shape packed_like(const shape& x);

// A kernel of this target (a cpu:: op): lowered already. The cpu ops share no base type
// or trait to ask, so this reads the prefix of the op's name, here and nowhere else.
bool is_cpu_kernel(instruction_ref ins);

// A non-empty static float32 tensor: what the oneDNN lowerings take.
bool f32_static(instruction_ref ins);
// A float32 tensor, static or dynamic (a generic program's operands).
bool f32_tensor(instruction_ref ins);
// ins and every input of it are f32_static.
bool all_f32_static(instruction_ref ins);

// x's data as oneDNN sees it: its recorded layout, or its IR shape's strides.
dnnl::memory::desc layout_md(const lower_env& env, instruction_ref x);
bool in_dnnl_layout(const lower_env& env, instruction_ref x);
// Each operand's recorded oneDNN layout, or an empty record for the plain ones.
std::vector<md_record> operand_layouts(const lower_env& env, const std::vector<instruction_ref>& operands);
// x as an IR (row-major) tensor: x itself, or a reorder placed right after x (made once).
instruction_ref plain(lower_env& env, instruction_ref x);

// A generic program's float32 instruction whose first input is dynamic, replaced by a
// kernel that wraps its op (`Wrapper::op`: cpu::dyn_pad, cpu::dyn_resize) over the same
// operands, the first read plain; false, and nothing changed, for anything else.
template <class Wrapper>
bool wrap_dynamic(lower_env& env, instruction_ref ins) {
    const auto& s = ins->get_shape();
    if (!s.is_tensor() || s.get_type() != type::float32 || ins->inputs().empty()) return false;
    const auto& xs = ins->inputs()[0]->get_shape();
    if (!xs.is_tensor() || !xs.dynamic()) return false;  // a static input: the static kernels
    auto operands = ins->inputs();
    operands[0] = plain(env, operands[0]);
    Wrapper w;
    w.op = ins->get_operator();
    env.m.replace_instruction(ins, w, operands);
    return true;
}
// x in layout `want` (same dims), with a reorder before `pos` when it is not already.
instruction_ref to_layout(lower_env& env, instruction_ref pos, instruction_ref x, const dnnl::memory::desc& want);
// x with the IR layout `layout` (strides; same lens and type): x, or a reorder before `pos`.
instruction_ref ensure_layout(lower_env& env, instruction_ref pos, instruction_ref x, const shape& layout);

// When `out`'s only reader is a transpose read only by reshapes (or flattens) that would
// copy it into row-major order (attention's context: [b, heads, seq, d] -> [b, seq,
// heads * d]): a float32 shape of `lens` whose strides are that transposed order. Written
// that way, the transpose reads row-major memory, the reshape is a view and the copy
// disappears.
std::optional<shape> transposed_write_shape(instruction_ref out, const std::vector<std::size_t>& lens);

// Replaces `ins` by `op` over `operands`, with a planned scratchpad (when the primitive
// needs one) and output buffer. `dst` is the result's IR shape (its strides are the
// output layout unless op.dst_layout is set, or op.any_dst lets oneDNN choose). The
// operands' oneDNN layouts are taken from the env. Returns false, changing nothing,
// when oneDNN has no kernel for it (the op then stays for the reference kernels).
// `out`: the output buffer when it is an existing value (a sum post-op's residual), else
// one is allocated. `refuse_reference`: false too where oneDNN would run its reference
// implementation (scalar code with an index computation per element), for ops the
// generated kernels do better (codegen takes what the lowering leaves).
template <class Op>
bool emit(lower_env& env, instruction_ref ins, Op op, std::vector<instruction_ref> operands, const shape& dst,
          std::optional<instruction_ref> out = std::nullopt, bool refuse_reference = false) {
    op.layouts.clear();
    bool any_blocked = false;
    for (auto x : operands) {
        auto it = env.layout.find(&*x);
        op.layouts.push_back(it == env.layout.end() ? md_record{} : it->second);
        any_blocked = any_blocked || it != env.layout.end();
    }
    if (!any_blocked) op.layouts.clear();
    // oneDNN reads a 0-D descriptor as an empty tensor (it would compute nothing).
    if (dst.ndim() == 0) return false;
    std::size_t scratch = 0;
    try {
        auto pd = op.make_pd(env.ctx.engine(), to_shapes(operands), dst);
        if (refuse_reference && impl_name(pd).find("ref") != std::string::npos) return false;
        if (op.any_dst) {
            if (!md_record::representable(pd.dst_desc())) return false;
            op.dst_layout = md_record::from(pd.dst_desc());
            op.any_dst = false;
        }
        scratch = pd.scratchpad_desc().get_size();
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
    shape buffer = dst;
    if (!op.dst_layout.empty()) buffer = shape(type::uint8, {op.dst_layout.to_md().get_size()});
    args.push_back(out ? *out : env.m.insert_instruction(ins, builtin::allocate{buffer}, {}));
    env.m.replace_instruction(ins, op, args);
    if (!op.dst_layout.empty()) env.layout[&*ins] = op.dst_layout;
    return true;
}

// An ONNX LSTM whose Y alone is used (op_rnn.cpp) on Kiln's packed kernel (cpu::lstm_packed)
// or on oneDNN's (cpu::lstm); the instructions it leaves dead (the tuple and its unused
// elements) go to env.dead, removed after the walk.
bool lower_lstm_kiln(lower_env& env, instruction_ref ins);
bool lower_lstm_onednn(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
