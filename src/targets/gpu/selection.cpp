// The candidate list (selection.hpp).
#include "targets/gpu/selection.hpp"

#include "codegen/plan.hpp"
#include "ops/fused.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/reduce.hpp"
#include "ops/softmax.hpp"
#include "passes/fuse_pointwise.hpp"
#include "passes/rewrite_utils.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/kernels/fused_kernel.hpp"
#include "targets/gpu/kernels/lt_matmul.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>

namespace kiln::gpu {

namespace {

// A fused group (or one op as a group) as a generated kernel, when its plan is one the
// CUDA generator writes.
bool lower_group(module& m, instruction_ref ins, const gpu_options& o, op::fused body,
                 std::vector<instruction_ref> inputs) {
    const auto out = ins->get_shape().as_standard();
    kiln::codegen::plan plan;
    try {
        plan = kiln::codegen::make_plan(body, to_shapes(inputs), out, o.fast_math);
    } catch (const error& e) {
        if (e.code() != error_code::unsupported) throw;
        return false;
    }
    if (!codegen::can_emit(plan)) return false;
    fused_kernel k;
    k.body = std::move(body);
    k.fast_math = o.fast_math;
    k.symbol = codegen::kernel_symbol(plan);
    k.grid = codegen::grid_size(plan);
    inputs.push_back(m.insert_instruction(ins, builtin::allocate{out}, {}));
    m.replace_instruction(ins, k, inputs);
    return true;
}

bool lower_fused(module& m, instruction_ref ins, const gpu_options& o) {
    const auto* f = ins->get_operator().any_cast<op::fused>();
    return f && lower_group(m, ins, o, *f, ins->inputs());
}

bool lower_pointwise(module& m, instruction_ref ins, const gpu_options& o) {
    if (!ins->get_operator().traits().pointwise || !ins->module_inputs().empty() || !kiln::codegen::kernel_can_run(ins))
        return false;
    std::vector<instruction_ref> inputs;
    auto body = kiln::codegen::single_group(ins, inputs);
    return lower_group(m, ins, o, std::move(body), std::move(inputs));
}

// A lone reduction (constant axes, any keepdims) as a one-node group.
bool lower_reduction(module& m, instruction_ref ins, const gpu_options& o) {
    // kernel_can_run also declines the reductions plans lack (reduce_log_sum_exp).
    if (!ins->get_operator().traits().reduction || !is_fusible_reduction(ins) || !kiln::codegen::kernel_can_run(ins))
        return false;
    std::vector<instruction_ref> inputs;
    auto body = kiln::codegen::single_group(ins, inputs);
    return lower_group(m, ins, o, std::move(body), std::move(inputs));
}

// softmax / log_softmax spelled out as the group fusion would have made of the ONNX
// decomposition: m = reduce_max(x), e = exp(x - m), s = reduce_sum(e), then e / s (or
// (x - m) - log(s)). Three trips over a row in one kernel, no intermediate in memory.
bool lower_softmax(module& m, instruction_ref ins, const gpu_options& o) {
    const bool plain = rewrite::is<op::softmax>(ins);
    if (!plain && !rewrite::is<op::log_softmax>(ins)) return false;
    const auto& s = ins->inputs().at(0)->get_shape();
    if (!s.is_tensor() || s.dynamic() || s.get_type() != type::float32 || s.elements() == 0 || s.ndim() == 0)
        return false;
    auto axis = ins->get_operator().to_value().at("axis").get_int64();
    if (axis < 0) axis += static_cast<std::int64_t>(s.ndim());
    if (axis < 0 || axis >= static_cast<std::int64_t>(s.ndim())) return false;
    op::reduce_max max;
    op::reduce_sum sum;
    max.axes = sum.axes = {axis};
    max.keepdims = sum.keepdims = true;
    const std::int64_t x = op::fused_input_arg(0);
    op::fused f;
    f.nodes.push_back({max, {x}});              // 0
    f.nodes.push_back({op::sub_op{}, {x, 0}});  // 1
    f.nodes.push_back({op::exp_op{}, {1}});     // 2
    f.nodes.push_back({sum, {2}});              // 3
    if (plain) {
        f.nodes.push_back({op::div_op{}, {2, 3}});
    } else {
        f.nodes.push_back({op::log_op{}, {3}});  // 4
        f.nodes.push_back({op::sub_op{}, {1, 4}});
    }
    return lower_group(m, ins, o, std::move(f), {ins->inputs().at(0)});
}

bool static_f32(const shape& s) { return s.is_tensor() && !s.dynamic() && s.get_type() == type::float32; }

// matmul of static float32 tensors that cuBLASLt can read as they are (plan_lt accepts
// them: row-major or transposed views, one batch stride or a broadcast matrix).
bool lower_matmul(module& m, instruction_ref ins, const gpu_options&) {
    if (!rewrite::is<op::matmul>(ins) || ins->inputs().size() != 2) return false;
    const auto& a = ins->inputs()[0]->get_shape();
    const auto& b = ins->inputs()[1]->get_shape();
    if (!static_f32(a) || !static_f32(b) || !static_f32(ins->get_shape())) return false;
    try {
        (void)plan_lt(a, b, ins->get_shape().as_standard(), false, false);
    } catch (const error&) {
        return false;
    }
    auto workspace = m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {lt_workspace_bytes})}, {});
    auto out = m.insert_instruction(ins, builtin::allocate{ins->get_shape().as_standard()}, {});
    m.replace_instruction(ins, lt_matmul{}, {ins->inputs()[0], ins->inputs()[1], workspace, out});
    return true;
}

// gemm (alpha op(a) op(b) + beta c) of static float32 2-D operands cuBLASLt reads as they
// are, c absent or one value per output column with beta 1 (the bias epilogue).
bool lower_gemm(module& m, instruction_ref ins, const gpu_options&) {
    const auto* g = ins->get_operator().any_cast<op::gemm>();
    if (!g || ins->inputs().size() < 2 || ins->inputs().size() > 3) return false;
    const auto& a = ins->inputs()[0]->get_shape();
    const auto& b = ins->inputs()[1]->get_shape();
    const auto out_shape = ins->get_shape();
    if (!static_f32(a) || !static_f32(b) || !static_f32(out_shape) || a.ndim() != 2 || b.ndim() != 2) return false;
    const bool bias = ins->inputs().size() == 3;
    if (bias) {
        const auto& c = ins->inputs()[2]->get_shape();
        if (!static_f32(c) || g->beta != 1.0f || !c.standard() || c.elements() != out_shape.lens().back() ||
            (c.ndim() == 2 && c.lens()[0] != 1) || c.ndim() > 2)
            return false;
    }
    try {
        (void)plan_lt(a, b, out_shape.as_standard(), g->trans_a, g->trans_b);
    } catch (const error&) {
        return false;
    }
    lt_matmul op;
    op.trans_a = g->trans_a;
    op.trans_b = g->trans_b;
    op.alpha = g->alpha;
    op.bias = bias;
    auto workspace = m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {lt_workspace_bytes})}, {});
    auto out = m.insert_instruction(ins, builtin::allocate{out_shape.as_standard()}, {});
    std::vector<instruction_ref> args = {ins->inputs()[0], ins->inputs()[1]};
    if (bias) args.push_back(ins->inputs()[2]);
    args.push_back(workspace);
    args.push_back(out);
    m.replace_instruction(ins, op, args);
    return true;
}

}  // namespace

const std::vector<candidate>& candidates() {
    static const std::vector<candidate> list = {
        {"fused (elementwise and reduction groups)", "generated",
         "the group's plan is one the generator writes (CUDA C++ per group, compiled by NVRTC)", lower_fused},
        {"pointwise ops", "generated", "a lone elementwise op the generator handles (static shapes, its element types)",
         lower_pointwise},
        {"reduce_{sum, mean, max, min, prod, l1, l2, sum_square, log_sum}", "generated",
         "float32, static shapes, constant axes (any, any keepdims): one row per warp or per block", lower_reduction},
        {"softmax, log_softmax", "generated",
         "float32, static shapes, any axis: the group reduce_max, sub, exp, reduce_sum, div (log_softmax: log, sub)",
         lower_softmax},
        {"matmul", "cublaslt",
         "static float32, rank >= 2, each operand row-major or a transposed view, batch dims of one stride or "
         "broadcast (plan_lt); a 32 MiB workspace planned in the arena",
         lower_matmul},
        {"gemm", "cublaslt",
         "static float32 2-D operands plan_lt takes (trans_a/trans_b as op T), alpha; C absent or one value per "
         "output column with beta 1 (cuBLASLt's bias epilogue)",
         lower_gemm},
    };
    return list;
}

std::string lower_instruction(module& m, instruction_ref ins, const gpu_options& o) {
    for (const auto& c : candidates())
        if (c.lower(m, ins, o)) return c.kernel;
    return {};
}

std::string selection_table() {
    std::string t = "| ops | kernel | rule |\n| --- | --- | --- |\n";
    for (const auto& c : candidates()) t += std::string("| ") + c.ops + " | " + c.kernel + " | " + c.rule + " |\n";
    t += "| any other | ref | the reference kernel |\n";
    return t;
}

}  // namespace kiln::gpu
