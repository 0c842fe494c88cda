// quantize_fp16 / quantize_bf16 (include/kiln/quantization.hpp).
//
// Why src/quantize and not src/passes: the caller picks the ops by name (MIGraphX's API,
// the CLI), which the passes' rule (ask traits or types, never names) forbids there, and
// the transformation is of a program before compile (it records its type in the program's
// metadata), not a step of a target's pipeline. The int8 calibration belongs here too.
//
// How: every chosen instruction is rebuilt on reduced inputs and the original is replaced
// by a convert of the new one back to float32, so the module stays valid after each step
// and the unchosen users keep seeing float32. A chosen user of such a convert reads the
// reduced value directly, so chains of chosen ops exchange reduced values with no convert
// between them; converts nobody reads are dropped at the end.
#include <kiln/quantization.hpp>

#include "ops/convert.hpp"
#include "passes/dead_code_elimination.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <algorithm>
#include <set>
#include <unordered_map>

namespace kiln {

namespace {

// Compute ops whose kernels accumulate in float32 (the ref kernels, oneDNN): reduced always.
const std::set<std::string>& heavy_ops() {
    static const std::set<std::string> s = {"convolution", "deconvolution", "matmul", "gemm", "pooling"};
    return s;
}

// Elementwise ops exact or well-conditioned in a 16-bit type, and data movement (exact):
// reduced when their float inputs are reduced values or constants, so activations stay
// reduced between the heavy ops.
// Left out on purpose: softmax, log_softmax, the norms and reduce_* (long float32
// accumulations), exp, log, pow, softplus (error grows with the magnitude), and ops with
// float inputs that are not data (resize's scales).
const std::set<std::string>& follower_ops() {
    static const std::set<std::string> s = {
        "add",       "sub",        "mul",       "div",       "max",        "min",        "clip",
        "where",     "relu",       "leaky_relu", "prelu",    "neg",        "abs",        "sigmoid",
        "tanh",      "erf",        "gelu",      "hard_sigmoid", "hard_swish", "swish",   "elu",
        "concat",    "reshape",    "reshape_dynamic", "flatten", "squeeze", "unsqueeze",  "transpose",
        "slice",     "gather",     "pad",       "broadcast", "expand_dynamic", "split",  "tile",
        "depth_to_space", "space_to_depth"};
    return s;
}

struct op_choice {
    bool all = false;
    std::set<std::string> names;

    explicit op_choice(const std::vector<std::string>& ops) {
        for (const auto& n : ops) {
            if (n == "all") all = true;
            else if (n == "dot") names.insert({"matmul", "gemm"});
            else if (has_op(n)) names.insert(n);
            else throw_error(error_code::invalid_argument, "quantize: unknown op '" + n + "' (an IR op name, \"dot\" or \"all\")");
        }
    }
    // `reduced_inputs`: its float inputs are reduced values or constants, one at least reduced.
    bool wants(const std::string& op, bool reduced_inputs) const {
        if (names.count(op)) return true;
        if (!all) return false;
        return heavy_ops().count(op) || (reduced_inputs && follower_ops().count(op));
    }
};

literal convert_literal(const literal& l, type to) {
    op::convert_op c{to};
    const shape out = l.get_shape().with_type(to);
    return literal(c.compute(out, {l.get_argument()}));
}

// A scalar constant that keeps its value in the reduced type. An elementwise op with one that
// does not (GELU's 1/sqrt(2), an epsilon) stays float32: its function would change, not just
// round, and the cpu target would no longer recognise it (GELU as a GEMM epilogue).
bool scalar_exact_in(instruction_ref x, type reduced) {
    if (!x->is_literal() || x->get_shape().elements() != 1) return true;
    const literal back = convert_literal(convert_literal(x->get_literal(), reduced), type::float32);
    return back.to_vector<double>() == x->get_literal().to_vector<double>();
}

void quantize_module(module& m, type reduced, const op_choice& choice) {
    // float32 value -> its reduced twin (made at most once each).
    std::unordered_map<const instruction*, instruction_ref> twin;
    // The converts back to float32 this function made (each has a reduced twin).
    std::set<const instruction*> lowered;
    auto reduced_of = [&](instruction_ref x) {
        if (auto it = twin.find(&*x); it != twin.end()) return it->second;
        instruction_ref r = x->is_literal() ? m.insert_literal(std::next(x), convert_literal(x->get_literal(), reduced))
                                            : m.insert_instruction(std::next(x), op::convert_op{reduced}, {x});
        twin.emplace(&*x, r);
        return r;
    };
    auto is_f32 = [](instruction_ref x) { return x->get_shape().is_tensor() && x->get_shape().get_type() == type::float32; };

    for (auto ins = m.begin(); ins != m.end();) {
        auto next = std::next(ins);
        if (ins->is_param() || ins->is_literal() || ins->is_return() || !is_f32(ins) || !ins->module_inputs().empty()) {
            ins = next;
            continue;
        }
        const auto& in = ins->inputs();
        const bool any_f32 = std::any_of(in.begin(), in.end(), is_f32);
        // A follower joins when its float inputs are all reduced values or constants (scalars
        // exact in the reduced type): one that mixes in a float32 computation (a LayerNorm's
        // mean, an attention mask) stays float32.
        const bool reduced_inputs = std::any_of(in.begin(), in.end(), [&](instruction_ref x) { return lowered.count(&*x) > 0; }) &&
                                 std::all_of(in.begin(), in.end(), [&](instruction_ref x) {
                                     return !is_f32(x) || (x->is_literal() && scalar_exact_in(x, reduced)) ||
                                            lowered.count(&*x) > 0;
                                 });
        if (!any_f32 || !choice.wants(ins->name(), reduced_inputs)) {
            ins = next;
            continue;
        }
        std::vector<instruction_ref> args;
        for (auto x : in) args.push_back(is_f32(x) ? reduced_of(x) : x);
        instruction_ref low;
        try {
            low = m.insert_instruction(ins, ins->get_operator(), args);
        } catch (const std::exception&) {
            ins = next;  // the op refuses the reduced type: it stays float32
            continue;
        }
        auto back = m.insert_instruction(ins, op::convert_op{type::float32}, {low});
        m.replace_instruction(ins, back);
        twin.emplace(&*back, low);
        lowered.insert(&*back);
        ins = next;
    }
    dead_code_elimination{}.apply(m);
}

}  // namespace

void quantize_float(program& p, type reduced, const std::vector<std::string>& ops) {
    if (reduced != type::float16 && reduced != type::bfloat16)
        throw_error(error_code::invalid_argument, "quantize_float: float16 or bfloat16, not " + std::string(type_name(reduced)));
    if (p.is_compiled()) throw_error(error_code::invalid_argument, "quantize: the program is already compiled (quantize before compile)");
    const op_choice choice(ops);
    quantize_module(*p.get_main_module(), reduced, choice);
    auto meta = p.get_metadata();
    if (!meta.is_object()) meta = value::make_object();
    meta["quantized"] = std::string(type_name(reduced));
    p.set_metadata(meta);
}

void quantize_fp16(program& p, const std::vector<std::string>& ops) { quantize_float(p, type::float16, ops); }
void quantize_bf16(program& p, const std::vector<std::string>& ops) { quantize_float(p, type::bfloat16, ops); }

type quantized_type(const program& p) {
    const auto& meta = p.get_metadata();
    if (meta.is_object())
        if (const auto* q = meta.find("quantized"); q && q->is_string()) return type_from_name(q->get_string());
    return type::float32;
}

}  // namespace kiln
