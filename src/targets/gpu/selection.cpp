// The candidate list (selection.hpp).
#include "targets/gpu/selection.hpp"

#include "codegen/plan.hpp"
#include "ops/common.hpp"
#include "ops/fused.hpp"
#include "ops/nn_matmul.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/tensor_gather.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/reduce.hpp"
#include "ops/softmax.hpp"
#include "passes/attention_match.hpp"
#include "passes/fuse_pointwise.hpp"
#include "passes/rewrite_utils.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/codegen/emit_attention.hpp"
#include "targets/gpu/codegen/emit_move.hpp"
#include "targets/gpu/kernels/cudnn_conv.hpp"
#include "targets/gpu/kernels/fused_kernel.hpp"
#include "targets/gpu/kernels/lt_matmul.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>

#include <algorithm>

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
    if (!ins->get_operator().traits().pointwise || !ins->module_inputs().empty() || !kiln::codegen::kernel_can_run(ins, true))
        return false;
    std::vector<instruction_ref> inputs;
    auto body = kiln::codegen::single_group(ins, inputs);
    return lower_group(m, ins, o, std::move(body), std::move(inputs));
}

// A lone reduction (constant axes, any keepdims) as a one-node group.
bool lower_reduction(module& m, instruction_ref ins, const gpu_options& o) {
    // kernel_can_run also declines the reductions plans lack (reduce_log_sum_exp).
    if (!ins->get_operator().traits().reduction || !is_fusible_reduction(ins) || !kiln::codegen::kernel_can_run(ins, true))
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

// The attention body (codegen/emit_attention.hpp) of a match: the matched instructions'
// own ops over inputs q, kt, v [, mask], so the kernel's reference compute is theirs.
op::fused attention_body(const attention_match::match& mt) {
    const auto in = [](std::size_t i) { return op::fused_input_arg(i); };
    op::fused f;
    f.nodes.push_back({mt.qk->get_operator(), {in(0), in(1)}});
    std::int64_t scores = 0;
    if (mt.scaling) {
        const auto x = *mt.scaling;
        const bool literal_first = x->inputs()[0]->is_literal() && x->inputs()[0]->get_shape().elements() == 1 &&
                                   !(x->inputs()[1]->is_literal() && x->inputs()[1]->get_shape().elements() == 1);
        const auto lit = x->inputs()[literal_first ? 0 : 1];
        f.nodes.push_back({op::fused_literal{lit->get_literal()}, {}});
        const std::int64_t c = 1;
        f.nodes.push_back({x->get_operator(), literal_first ? std::vector<std::int64_t>{c, scores}
                                                            : std::vector<std::int64_t>{scores, c}});
        scores = 2;
    }
    if (mt.select) {
        const auto w = *mt.select;
        const bool fill_first = mt.fill_first;
        f.nodes.push_back({op::fused_literal{w->inputs()[fill_first ? 1 : 2]->get_literal()}, {}});
        const auto fill = static_cast<std::int64_t>(f.nodes.size()) - 1;
        f.nodes.push_back({w->get_operator(), fill_first ? std::vector<std::int64_t>{in(3), fill, scores}
                                                         : std::vector<std::int64_t>{in(3), scores, fill}});
        scores = static_cast<std::int64_t>(f.nodes.size()) - 1;
    } else if (mt.mask) {
        const auto add = mt.between.at(1);
        const bool mask_first = add->inputs()[0] == *mt.mask && add->inputs()[1] != *mt.mask;
        f.nodes.push_back({add->get_operator(), mask_first ? std::vector<std::int64_t>{in(3), scores}
                                                           : std::vector<std::int64_t>{scores, in(3)}});
        scores = static_cast<std::int64_t>(f.nodes.size()) - 1;
    }
    f.nodes.push_back({mt.between.front()->get_operator(), {scores}});  // the softmax
    f.nodes.push_back({mt.pv->get_operator(), {static_cast<std::int64_t>(f.nodes.size()) - 1, in(2)}});
    return f;
}

// Static operands of one type cuBLASLt takes (float32, or fp16/bf16 accumulated in fp32).
bool static_lt(const shape& s, type t) { return s.is_tensor() && !s.dynamic() && s.get_type() == t && lt_element_type(t); }

// matmul of static float32 tensors that cuBLASLt can read as they are (plan_lt accepts
// them: row-major or transposed views, one batch stride or a broadcast matrix).
bool lower_matmul(module& m, instruction_ref ins, const gpu_options& o) {
    if (!rewrite::is<op::matmul>(ins) || ins->inputs().size() != 2) return false;
    const auto& a = ins->inputs()[0]->get_shape();
    const auto& b = ins->inputs()[1]->get_shape();
    if (!static_lt(a, a.get_type()) || !static_lt(b, a.get_type()) || !static_lt(ins->get_shape(), a.get_type())) return false;
    try {
        (void)plan_lt(a, b, ins->get_shape().as_standard(), false, false);
    } catch (const error&) {
        return false;
    }
    auto workspace = m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {lt_workspace_bytes})}, {});
    auto out = m.insert_instruction(ins, builtin::allocate{ins->get_shape().as_standard()}, {});
    lt_matmul op;
    op.tf32 = o.tf32;
    m.replace_instruction(ins, op, {ins->inputs()[0], ins->inputs()[1], workspace, out});
    return true;
}

// gemm (alpha op(a) op(b) + beta c) of static float32 2-D operands cuBLASLt reads as they
// are, c absent or one value per output column with beta 1 (the bias epilogue).
bool lower_gemm(module& m, instruction_ref ins, const gpu_options& o) {
    const auto* g = ins->get_operator().any_cast<op::gemm>();
    if (!g || ins->inputs().size() < 2 || ins->inputs().size() > 3) return false;
    const auto& a = ins->inputs()[0]->get_shape();
    const auto& b = ins->inputs()[1]->get_shape();
    const auto out_shape = ins->get_shape();
    const type t = a.get_type();
    if (!static_lt(a, t) || !static_lt(b, t) || !static_lt(out_shape, t) || a.ndim() != 2 || b.ndim() != 2) return false;
    const bool bias = ins->inputs().size() == 3;
    if (bias) {
        const auto& c = ins->inputs()[2]->get_shape();
        if (!static_lt(c, t) || g->beta != 1.0f || !c.standard() || c.elements() != out_shape.lens().back() ||
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
    op.tf32 = o.tf32;
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

// softmax(Q K^T [scaled] [+ mask]) V (passes/attention_match.hpp) as one generated kernel,
// anchored at the softmax: the pv matmul becomes the kernel, the rest goes.
bool lower_attention(module& m, instruction_ref ins, const gpu_options& o) {
    if (!o.attention) return false;
    const auto mt = attention_match::match_at(ins);
    if (!mt) return false;
    std::vector<instruction_ref> inputs = {mt->qk->inputs()[0], mt->qk->inputs()[1], mt->pv->inputs()[1]};
    if (mt->mask) inputs.push_back(*mt->mask);
    auto body = attention_body(*mt);
    const auto shapes = to_shapes(inputs);
    if (!codegen::attention_problem(body, shapes).empty()) return false;
    const auto out = mt->pv->get_shape().as_standard();
    if (!body.compute_shape(shapes).same_lens_and_type(out)) return false;
    fused_kernel k;
    k.fast_math = o.fast_math;
    k.symbol = codegen::attention_symbol(body, shapes);
    k.grid = codegen::attention_grid(body, shapes);
    k.body = std::move(body);
    inputs.push_back(m.insert_instruction(mt->pv, builtin::allocate{out}, {}));
    m.replace_instruction(mt->pv, k, inputs);
    for (auto x : mt->between) m.remove_instruction(x);  // softmax, then the add, the scale
    m.remove_instruction(mt->qk);
    return true;
}

namespace {

// Data movement (codegen/emit_move.hpp) as a fused_kernel whose body is the op itself: it
// is compiled, saved and launched like the elementwise kernels, and its reference compute
// is the op's own.
// Shape arithmetic of a generic program (shape_of, its slices, concats of them and of
// literals): small integer values that host ops read (reshape_dynamic, ...). They stay on
// the host; moving them to the device would only add copies back.
bool shape_value(instruction_ref ins, int depth = 0) {
    const auto& s = ins->get_shape();
    if (depth > 16 || !s.is_tensor() || s.dynamic() || s.elements() > 64) return false;
    if (s.get_type() != type::int64 && s.get_type() != type::int32) return false;
    if (rewrite::is<op::shape_of>(ins) || ins->is_literal()) return true;
    if (ins->is_param() || ins->inputs().empty()) return false;
    return std::all_of(ins->inputs().begin(), ins->inputs().end(),
                       [&](instruction_ref x) { return shape_value(x, depth + 1); });
}

bool lower_move_group(module& m, instruction_ref ins, const gpu_options& o) {
    if (!ins->module_inputs().empty() || !ins->get_shape().is_tensor() || ins->get_shape().dynamic() ||
        ins->get_shape().elements() == 0 || shape_value(ins))
        return false;
    op::fused body;
    op::fused_node n{ins->get_operator(), {}};
    for (std::size_t i = 0; i < ins->inputs().size(); ++i) n.args.push_back(op::fused_input_arg(i));
    body.nodes.push_back(std::move(n));
    const auto inputs = to_shapes(ins->inputs());
    if (!codegen::is_move(body, inputs)) return false;
    const auto out = ins->get_shape().as_standard();
    fused_kernel k;
    k.body = std::move(body);
    k.fast_math = o.fast_math;
    k.symbol = codegen::move_symbol(k.body, inputs, out);
    k.grid = codegen::move_grid(out.elements());
    auto args = ins->inputs();
    args.push_back(m.insert_instruction(ins, builtin::allocate{out}, {}));
    m.replace_instruction(ins, k, args);
    return true;
}

// reshape/flatten of a strided input: a copy in row-major order (of a row-major input they
// are views and stay free).
bool lower_reshape_copy(module& m, instruction_ref ins, const gpu_options& o) {
    if (!rewrite::is<op::reshape>(ins) && !rewrite::is<op::flatten>(ins)) return false;
    if (ins->inputs().size() != 1 || ins->get_operator().output_alias(to_shapes(ins->inputs())) == 0) return false;
    return lower_move_group(m, ins, o);
}

// Literal indices are checked here: an out-of-range one stays on the host, whose
// reference kernel reports it.
bool lower_gather(module& m, instruction_ref ins, const gpu_options& o) {
    const auto* g = ins->get_operator().any_cast<op::gather>();
    if (!g || ins->inputs().size() != 2) return false;
    const auto idx = ins->inputs()[1];
    if (idx->is_literal()) {
        const auto& data = ins->inputs()[0]->get_shape();
        if (!data.is_tensor() || data.dynamic() || data.ndim() == 0) return false;
        const auto n = static_cast<std::int64_t>(data.lens()[op::normalize_axis(g->axis, data.ndim(), "gather")]);
        for (auto v : idx->get_literal().get_argument().to_vector<std::int64_t>())
            if (v < -n || v >= n) return false;
    }
    return lower_move_group(m, ins, o);
}

bool lower_concat(module& m, instruction_ref ins, const gpu_options& o) {
    return rewrite::is<op::concat>(ins) && lower_move_group(m, ins, o);
}

bool lower_pad_tile(module& m, instruction_ref ins, const gpu_options& o) {
    return (rewrite::is<op::pad>(ins) || rewrite::is<op::tile>(ins)) && lower_move_group(m, ins, o);
}

// split of a static tensor whose results are only taken apart: each part a slice view.
bool lower_split(module& m, instruction_ref ins, const gpu_options&) {
    const auto* sp = ins->get_operator().any_cast<op::split>();
    if (!sp || ins->inputs().size() != 1) return false;
    const auto& x = ins->inputs()[0]->get_shape();
    if (!x.is_tensor() || x.dynamic() || x.ndim() == 0) return false;
    const auto users = ins->outputs();
    for (auto u : users)
        if (!rewrite::is<builtin::get_tuple_elem>(u)) return false;
    const auto a = op::normalize_axis(sp->axis, x.ndim(), "split");
    if (!ins->get_shape().is_tuple()) return false;
    const auto parts = ins->get_shape().sub_shapes();
    std::vector<std::int64_t> starts;
    std::int64_t at = 0;
    for (const auto& p : parts) {
        starts.push_back(at);
        at += static_cast<std::int64_t>(p.lens()[a]);
    }
    for (auto u : users) {
        const auto i = u->get_operator().get<builtin::get_tuple_elem>().index;
        op::slice s;
        s.axes = {static_cast<std::int64_t>(a)};
        s.starts = {starts.at(i)};
        s.ends = {starts.at(i) + static_cast<std::int64_t>(parts.at(i).lens()[a])};
        m.replace_instruction(u, s, {ins->inputs()[0]});
    }
    return true;
}

// Global average pooling (and a window that covers the whole unpadded input): a mean over
// the spatial axes, i.e. a reduction kernel with one warp or block per (batch, channel)
// plane instead of one thread walking the plane (EfficientNet's squeeze-excitation pools
// 112x112 planes). Global max pooling stays a window kernel: the reference keeps the first
// NaN of a window, a reduction propagates any.
bool lower_global_pool(module& m, instruction_ref ins, const gpu_options& o) {
    const auto* p = ins->get_operator().any_cast<op::pooling>();
    if (!p || p->mode != op::pooling_mode::average || ins->inputs().size() != 1) return false;
    const auto& x = ins->inputs()[0]->get_shape();
    if (!x.is_tensor() || x.dynamic() || x.get_type() != type::float32 || x.ndim() < 3 || x.elements() == 0) return false;
    const auto g = p->geom(x);
    for (std::size_t d = 0; d < g.in.size(); ++d)
        if (g.kernel[d] != g.in[d] || g.pad_begin[d] != 0 || g.pad_end[d] != 0 || g.out[d] != 1 || g.dilation[d] != 1)
            return false;
    op::reduce_mean mean;
    for (std::size_t d = 2; d < x.ndim(); ++d) mean.axes.push_back(static_cast<std::int64_t>(d));
    mean.keepdims = true;
    op::fused f;
    f.nodes.push_back({mean, {op::fused_input_arg(0)}});
    return lower_group(m, ins, o, std::move(f), {ins->inputs()[0]});
}

// Max and average pooling with a window (codegen/emit_move.cpp's window kernel).
bool lower_window_pool(module& m, instruction_ref ins, const gpu_options& o) {
    return rewrite::is<op::pooling>(ins) && lower_move_group(m, ins, o);
}

// A convolution cuDNN takes (cudnn_conv_takes: static float32, no bias left after
// split_conv_bias, standard x and w), with its workspace as a planned buffer.
bool lower_convolution(module& m, instruction_ref ins, const gpu_options& o) {
    if (!o.cudnn || !cudnn_conv_takes(ins)) return false;
    auto conv = make_cudnn_conv(ins);
    conv.tf32 = o.tf32;
    auto workspace = m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {cudnn_workspace_bytes})}, {});
    auto out = m.insert_instruction(ins, builtin::allocate{ins->get_shape().as_standard()}, {});
    m.replace_instruction(ins, conv, {ins->inputs()[0], ins->inputs()[1], workspace, out});
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
        {"attention: softmax(matmul(q, kt) [* or / c] [+ mask | where(mask, ., fill)]) -> matmul(., v)", "generated",
         "float32, static, q/kt/v of one rank and batch dims (any strides), D and Dv <= 128, a float32 added mask or "
         "a bool select with a scalar fill broadcasting to the scores, every intermediate read once: one kernel "
         "with an online softmax (run by "
         "gpu::fuse_attention before fusion, anchored at the softmax; KILN_GPU_ATTENTION=0 off)",
         lower_attention},
        {"softmax, log_softmax", "generated",
         "float32, static shapes, any axis: the group reduce_max, sub, exp, reduce_sum, div (log_softmax: log, sub)",
         lower_softmax},
        {"matmul", "cublaslt",
         "static float32 (fp16/bf16: fp32 accumulation), rank >= 2, each operand row-major or a transposed view, batch dims of one stride or "
         "broadcast (plan_lt); a 32 MiB workspace planned in the arena",
         lower_matmul},
        {"gemm", "cublaslt",
         "static float32 (fp16/bf16) 2-D operands plan_lt takes (trans_a/trans_b as op T), alpha; C absent or one value per "
         "output column with beta 1 (cuBLASLt's bias epilogue)",
         lower_gemm},
        {"reshape, flatten", "generated",
         "a static input that is not row-major (a transposed or sliced view): a strided copy into the output buffer "
         "(of a row-major input they are free views)",
         lower_reshape_copy},
        {"gather", "generated",
         "static shapes, any axis, int32/int64 indices (negative ones from the end); an out-of-range index is "
         "clamped and reported as an error after the eval (literal indices are checked here instead)",
         lower_gather},
        {"concat", "generated", "static shapes, up to 63 inputs, any axis and strides", lower_concat},
        {"pad, tile", "generated", "static shapes; pad in every mode (constant, edge, wrap, reflect), negative pads crop",
         lower_pad_tile},
        {"split", "view", "a static input whose results are only taken apart (get_tuple_elem): each part a slice view",
         lower_split},
        {"pooling (global average)", "generated",
         "float32, static, average over the whole unpadded input: a reduce_mean over the spatial axes (one warp or "
         "block per plane)",
         lower_global_pool},
        {"pooling (max, average)", "generated",
         "float32 (fp16/bf16 too), static, a window (any size, stride, dilation, padding, ceil mode, count_include_pad): one thread "
         "per output element, the window in the reference's order (max keeps the first NaN; average sums in double)",
         lower_window_pool},
        {"convolution", "cudnn",
         "static float32 (fp16/bf16: fp32 compute), 1-3 spatial dims, any group, row-major x and w, its bias moved "
         "into the epilogue by split_conv_bias; cuDNN's backend graph, engines summing in fp32 (no FFT, Winograd or "
         "TF32 unless --tf32), a 32 MiB "
         "workspace planned in the arena; no such plan on the device: the reference convolution on the host",
         lower_convolution},
        {"lstm", "cublaslt + generated",
         "float32, static, layout 0, forward, reverse or bidirectional, default activations, bias and initial h/c "
         "optional, no sequence_lens, peepholes, clip or input_forget, hidden size <= 1024: X W^T for every step as "
         "one cuBLASLt product, then one persistent kernel (a block per direction and batch row) for the "
         "recurrence; Y, Y_h, Y_c views of its buffer (KILN_GPU_LSTM=0 off)",
         lower_lstm},
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
