// The candidate lists (selection.hpp). Each kernel's header has the measurements behind
// its rule; the rules here are their one-line summaries.
#include "targets/cpu/selection.hpp"

#include "targets/cpu/kernels/channel_affine/channel_affine.hpp"
#include "targets/cpu/kernels/channel_gather/channel_gather.hpp"
#include "targets/cpu/kernels/channel_mul/channel_mul.hpp"
#include "targets/cpu/kernels/concat_plain/concat_plain.hpp"
#include "targets/cpu/kernels/dynamic/dyn_concat.hpp"
#include "targets/cpu/kernels/dynamic/dyn_pad.hpp"
#include "targets/cpu/kernels/dynamic/dyn_resize.hpp"
#include "targets/cpu/kernels/conv_gemm/conv_gemm.hpp"
#include "targets/cpu/dw_fusion.hpp"
#include "targets/cpu/kernels/dynamic/dyn_matmul.hpp"
#include "targets/cpu/kernels/gather_blocks/gather_blocks.hpp"
#include "targets/cpu/kernels/fp8/fp8_round_trip.hpp"
#include "targets/cpu/kernels/global_avg_pool/global_avg_pool.hpp"
#include "targets/cpu/kernels/int4_gemm/int4_gemm.hpp"
#include "targets/cpu/kernels/int8_depthwise/int8_depthwise.hpp"
#include "targets/cpu/kernels/int8_gemm/int8_gemm.hpp"
#include "targets/cpu/lower_ops.hpp"
#include "targets/cpu/kernels/max_pool_blocked/max_pool_blocked.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"
#include "targets/cpu/kernels/onednn/op_matmul.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm.hpp"
#include "targets/cpu/kernels/pixel_rows_view/pixel_rows_view.hpp"
#include "targets/cpu/kernels/silu/silu.hpp"
#include "targets/cpu/sum_post_op.hpp"
#include "targets/cpu/tuning.hpp"
#include "targets/cpu/tuning_int8.hpp"
#include "targets/cpu/kernels/winograd/winograd.hpp"

#include <type_traits>

namespace kiln::cpu {

namespace {

// The IR weights in the layout `op` wants on this CPU, as a literal; op records it.
template <class Op>
void relayout_weights(lower_env& env, anchor_plan& p, Op& op, instruction_ref pos) {
    auto wanted = op.make_pd(env.ctx.engine(), p.shapes, p.dst, true).weights_desc();
    if (!md_record::representable(wanted) || wanted.get_size() % sizeof(float) != 0)
        return;  // stays plain; the primitive takes it so
    dnnl::memory::desc plain;
    if constexpr (std::is_same_v<Op, convolution>) plain = op.weights_md(false);
    else plain = op.weights_md(p.dst.ndim(), false);
    p.operands[1] = env.derive(pos, p.operands[1], "dnnl " + to_value(md_record::from(wanted)).to_string(), [&] {
        const auto& w = p.operands[1]->get_literal().get_argument();
        auto mem = reorder_constant(env.ctx.engine(), plain, w.data(), wanted);
        // Bytes in oneDNN's layout (bf16 ones too), held as a float32 blob.
        return literal(shape(type::float32, {wanted.get_size() / sizeof(float)}), mem.get_data_handle());
    });
    op.weights = md_record::from(wanted);
}

// A plain convolution with constant weights (no depthwise convolution fused after it).
const convolution* own_conv(const anchor_site& s) {
    const auto* c = s.plan.op.any_cast<convolution>();
    return c && s.plan.constant_weights && !c->dw.active() && !c->bf16 ? c : nullptr;  // bf16: oneDNN's
}

bool take_winograd(anchor_site& s, bool rules) {
    const auto* c = own_conv(s);
    return c && lower_winograd(s.env, *c, s.plan.operands, s.plan.dst, s.pos, rules);
}

// F(2x2, 3x3) as a candidate of its own for the tuner: its weights are 1.8x the direct ones
// where F(4x4)'s are 4x, so it can win where few tiles make F(4x4) stream its weights from
// memory (resnet50's 7x7 layers). Under the rules `winograd` chooses the tile itself.
bool take_winograd_f2(anchor_site& s, bool rules) {
    const auto* c = own_conv(s);
    return !rules && c && lower_winograd(s.env, *c, s.plan.operands, s.plan.dst, s.pos, false, 2);
}

bool take_conv_gemm(anchor_site& s, bool rules) {
    const auto* c = own_conv(s);
    return c && lower_conv_gemm(s.env, *c, s.plan.operands, s.pos, s.replaced, rules);
}

bool take_onednn_convolution(anchor_site& s, bool) {
    const auto* c = s.plan.op.any_cast<convolution>();
    if (!c) return false;
    convolution op = *c;
    auto& p = s.plan;
    if (p.constant_weights) relayout_weights(s.env, p, op, s.pos);
    if (p.dw_weights_operand) relayout_dw_weights(s.env, p, op, s.pos);
    auto out = sum_into_residual(s.env, op, p.operands, p.dst, s.pos, s.replaced);
    return emit(s.env, s.pos, op, p.operands, p.dst, out);
}

bool take_packed_gemm(anchor_site& s, bool rules) {
    const auto* mm = s.plan.op.any_cast<matmul>();
    return mm && s.plan.constant_weights && lower_packed_gemm(s.env, *mm, s.plan.operands, s.plan.dst, s.pos, rules);
}

bool take_onednn_matmul(anchor_site& s, bool) {
    const auto* mm = s.plan.op.any_cast<matmul>();
    if (!mm) return false;
    matmul op = *mm;
    if (s.plan.constant_weights) relayout_weights(s.env, s.plan, op, s.pos);
    return emit(s.env, s.pos, op, s.plan.operands, s.plan.dst);
}

// A sigmoid whose product with its input becomes one cpu::silu: it waits for the product
// (lowered with it, see silu.hpp).
bool take_sigmoid_of_silu(lower_env& env, instruction_ref ins) {
    return own_silu_enabled(env.ctx.options()) && ins->outputs().size() == 1 && silu_sigmoid(ins->outputs().front());
}

bool take_silu(lower_env& env, instruction_ref ins) {
    if (!own_silu_enabled(env.ctx.options())) return false;
    auto s = silu_sigmoid(ins);
    return s && lower_silu(env, ins, *s);
}

bool take_clip_or_pow(lower_env& env, instruction_ref ins) {
    // Bounds and exponents are separate (constant) inputs: only the eltwise form applies.
    return f32_static(ins) && f32_static(ins->inputs()[0]) && lower_eltwise(env, ins);
}

bool take_binary(lower_env& env, instruction_ref ins) { return lower_binary(env, ins, ins->name()); }
bool take_reduce(lower_env& env, instruction_ref ins) { return lower_reduce(env, ins, ins->name()); }
bool take_softmax(lower_env& env, instruction_ref ins) { return lower_softmax(env, ins, false); }
bool take_log_softmax(lower_env& env, instruction_ref ins) { return lower_softmax(env, ins, true); }
bool take_reshape_copy(lower_env& env, instruction_ref ins) {
    return ins->inputs().size() == 1 && lower_reshape_copy(env, ins);
}

bool names(const op_candidate& c, const std::string& n) {
    const std::string op = c.op;
    if (!op.empty() && op.back() == '*') return n.rfind(op.substr(0, op.size() - 1), 0) == 0;
    return op == n;
}

}  // namespace

const std::vector<anchor_candidate>& anchor_candidates() {
    static const std::vector<anchor_candidate> list = {
        {"convolution", "winograd",
         "3x3, stride 1, group 1, 16+ channels each side, constant weights, enough tiles (F(4x4); F(2x2) on "
         "AVX-512 where 4x4 tiles are too few) (winograd.hpp)",
         take_winograd},
        {"convolution", "winograd_f2",
         "only measured by exhaustive_tune (the rules reach F(2x2) through winograd): what winograd takes, in "
         "F(2x2, 3x3) (winograd.hpp)",
         take_winograd_f2},
        {"convolution", "conv_gemm",
         "AVX2+FMA, constant weights: few output pixels and a window of 2+ taps; on AVX-512 instead 1x1 "
         "layers streaming 8+ MiB (K <= 256 or a residual), strided 1x1 with few rows, tiny layers "
         "(conv_gemm.hpp)",
         take_conv_gemm},
        {"convolution", "onednn",
         "any other oneDNN builds (its own implementation; a 1x1 + depthwise pair as one kernel, a residual "
         "add as the in-place sum); all of a bf16 program's with 64+ output channels, in bf16, where the CPU "
         "has native bf16 (widen_reduced.hpp)",
         take_onednn_convolution},
        {"matmul", "packed_gemm",
         "constant 2-D weights, row-major A, 2+ rows with AVX2+FMA (any with AVX-512), post-ops the epilogue "
         "has; a bf16 program's in bf16 (vdpbf16ps) where the CPU has AVX512-BF16 (packed_gemm.hpp)",
         take_packed_gemm},
        {"matmul", "onednn", "any other oneDNN builds (weights reordered once when constant)", take_onednn_matmul},
    };
    return list;
}

const std::vector<op_candidate>& op_candidates() {
    static const std::vector<op_candidate> list = {
        {"lstm", "lstm_packed",
         "default activations, no clip or sequence lengths (lstm_kernel.hpp); a generic program's on cpu::dyn_lstm "
         "(dyn_lstm.hpp)",
         false, lower_lstm_kiln},
        {"lstm", "onednn", "forward or reverse, time-major, no peepholes", false, lower_lstm_onednn},
        {"gru", "onednn",
         "default activations, no clip or sequence lengths, time-major, constant weights; any direction, "
         "linear_before_reset 0 or 1 (oneDNN's gru / lbr_gru); a generic program's on cpu::dyn_recurrent, made per "
         "shape (dyn_recurrent.hpp)",
         false, lower_gru_onednn},
        {"rnn", "onednn",
         "one activation for every direction (Relu, Tanh or Sigmoid), no clip or sequence lengths, time-major, "
         "constant weights; any direction (oneDNN's vanilla_rnn); a generic program's on cpu::dyn_recurrent",
         false, lower_rnn_onednn},
        {"transpose", "pixel_rows_view",
         "perm (0, 2, 1) of a reshape to [N, C, HW] of a channels-last activation: a view (pixel_rows_view.hpp)",
         false, lower_pixel_rows_view},
        {"clip", "onednn_eltwise", "static float32 input and result", false, take_clip_or_pow},
        {"pow", "onednn_eltwise", "static float32 input and result", false, take_clip_or_pow},
        {"gather", "channel_gather",
         "constant channels of a 4-D activation in a channels-last or blocked layout, or of a concat of such parts "
         "that only these gathers read: one pass (channel_gather.hpp)",
         false, lower_channel_gather},
        {"gather", "onednn", "one constant index: a strided window of the data, copied", false, lower_gather},
        {"gather", "gather_blocks", "rows of a blocked activation (gather_blocks.hpp)", false, lower_gather_blocks},
        {"matmul", "dyn_matmul", "a generic program's product: sizes read at run time (dyn_matmul.hpp)", false,
         lower_dyn_matmul},
        {"gemm", "dyn_matmul", "a generic program's gemm with alpha 1: the product plus its bias", false,
         lower_dyn_gemm},
        {"matmul_int4", "int4_gemm", "static, row-major float32 a: int4 panels unpacked in registers (int4_gemm.hpp)",
         false, lower_int4_gemm},
        {"quant_convolution", "int8_gemm",
         "no VNNI: 1x1, stride 1, no padding, group 1, int8 literal weights, u8/s8 x channels-last, or group 1 "
         "with at most 64 inputs per window through int8_im2col: exact int16 vpmaddwd GEMM (int8_gemm.hpp)",
         false, lower_int8_gemm},
        {"quant_convolution", "int8_depthwise",
         "no VNNI: depthwise 3x3, any stride and padding, int8 literal weights, u8/s8 x channels-last: exact "
         "(int8_depthwise.hpp); with VNNI where exhaustive_tune measured it faster than onednn_int8 (tuning_int8.hpp)",
         false, lower_int8_depthwise},
        {"quant_convolution", "int8_gemm_vnni",
         "AVX-512 VNNI, only with KILN_CPU_INT8_KERNELS=own (slower than onednn_int8 on MobileNetV2's 1x1 layers) "
         "or where exhaustive_tune measured it faster (tuning_int8.hpp): what int8_gemm takes without VNNI: exact "
         "vpdpbusd GEMM (int8_gemm_vnni.cpp)",
         false, lower_int8_gemm_vnni},
        {"quant_convolution", "onednn_int8",
         "VNNI, static, int8 weights (literal, zero point 0): u8/s8 x in channels-last; a residual as the in-place "
         "sum post-op (op_quant.hpp)",
         false,
         lower_quant_convolution},
        {"quant_dot", "int8_gemm", "no VNNI: int8 literal 2-D weights: exact int16 vpmaddwd GEMM (int8_gemm.hpp)",
         false, lower_int8_gemm},
        {"quant_dot", "int8_gemm_vnni",
         "AVX-512 VNNI: int8 literal 2-D weights (faster than onednn_int8 at bert_small's and MobileNetV2's "
         "shapes): exact vpdpbusd GEMM (int8_gemm_vnni.cpp)",
         false, lower_int8_gemm_vnni},
        {"quant_dot", "onednn_int8", "VNNI, static, int8 b: literal weights or a run-time operand (op_quant.hpp)", false,
         lower_quant_dot},
        {"quant_add", "quant_add", "static, u8 or s8, both operands in one packed layout (quant_loops.hpp)", false,
         lower_quant_add},
        {"quantize_linear", "onednn_reorder", "static, one scale and zero point, float32 to 8-bit", false,
         lower_quantize_linear},
        {"dequantize_linear", "fp8_round_trip",
         "of a saturating e4m3fn quantize_linear with the same one scale: one float32 pass (fp8_round_trip.hpp)", false,
         lower_fp8_round_trip},
        {"dequantize_linear", "onednn_reorder", "static, one scale and zero point, 8-bit to float32", false,
         lower_dequantize_linear},
        {"pooling", "max_pool_blocked", "max over a channel-blocked activation (max_pool_blocked.hpp)", true,
         lower_max_pool_blocked},
        {"pooling", "global_avg_pool", "average over each whole image (global_avg_pool.hpp)", true,
         lower_global_avg_pool},
        {"pooling", "onednn", "max or average, 3+ dims", true, lower_pooling},
        {"pooling", "onednn_8bit", "max of a static u8/s8 tensor, 3+ dims, in its IR strides (fuse_qdq's pools)", false,
         lower_pooling_8bit},
        {"softmax", "onednn", "", true, take_softmax},
        {"log_softmax", "onednn", "", true, take_log_softmax},
        {"layer_norm", "onednn", "", true, lower_layer_norm},
        {"batch_norm_inference", "channel_affine",
         "constant parameters, after a concat along channels or before a relu: one pass with them "
         "(channel_affine.hpp)",
         true, lower_channel_affine_bn},
        {"batch_norm_inference", "onednn", "", true, lower_batch_norm},
        {"lrn", "onednn", "", true, lower_lrn},
        {"reduce_*", "onednn", "sum, mean, l1, l2, ... (max and min stay on ref: -inf rows)", true, take_reduce},
        {"concat", "channel_affine", "read only by a batch norm that channel_affine takes: lowered with it", true,
         concat_waits_for_channel_affine},
        {"concat", "channel_gather", "read only by gathers of constant channels that channel_gather takes: read by them",
         true, concat_waits_for_channel_gather},
        {"concat", "dyn_concat",
         "a generic program's: block copies in the order its inputs are stored (channels-last kept; dyn_concat.hpp)",
         false, lower_dyn_concat},
        {"concat", "concat_plain", "copies into row-major or channel-blocked results (concat_plain.hpp)", true,
         lower_concat_plain},
        {"concat", "onednn", "", true, lower_concat},
        {"resize", "onednn", "nearest or linear modes oneDNN has", true, lower_resize},
        {"resize", "dyn_resize",
         "a generic program's float32: the reference taps summed in float32 over the two last axes, channels-last "
         "kept (dyn_resize.hpp)",
         false, lower_dyn_resize},
        {"resize_dynamic", "dyn_resize", "the same, its scales or sizes read when it runs", false, lower_dyn_resize},
        {"pad", "dyn_pad",
         "a generic program's constant float32 pads: a fill and a block copy per row, in the input's order; zero pads "
         "return the input (dyn_pad.hpp)",
         false, lower_dyn_pad},
        {"pad_dynamic", "dyn_pad", "the same, its pads read when it runs", false, lower_dyn_pad},
        {"reshape", "reshape_copy", "an input that is not row-major: one copy", true, take_reshape_copy},
        {"flatten", "reshape_copy", "an input that is not row-major: one copy", true, take_reshape_copy},
        {"relu", "channel_affine", "of a batch norm that channel_affine takes: lowered with it", true,
         lower_channel_affine_relu},
        {"relu", "onednn_eltwise", "", true, lower_eltwise},
        {"sigmoid", "silu", "with fast_math, the sigmoid of x * sigmoid(x): lowered with the product", true,
         take_sigmoid_of_silu},
        {"sigmoid", "onednn_eltwise", "", true, lower_eltwise},
        {"mul", "silu", "with fast_math, x * sigmoid(x) over a big result (silu.hpp)", true, take_silu},
        {"mul", "channel_mul", "x times one value per channel (channel_mul.hpp)", true, lower_channel_mul},
        {"mul", "onednn_binary", "a jit kernel (float32: not oneDNN's reference code, e.g. a broadcast over a middle axis; codegen runs those)", true,
         take_binary},
        {"add", "onednn_binary", "a jit kernel (float32: not oneDNN's reference code, e.g. a broadcast over a middle axis; codegen runs those)", true,
         take_binary},
        {"sub", "onednn_binary", "a jit kernel (float32: not oneDNN's reference code, e.g. a broadcast over a middle axis; codegen runs those)", true,
         take_binary},
        {"div", "onednn_binary", "a jit kernel (float32: not oneDNN's reference code, e.g. a broadcast over a middle axis; codegen runs those)", true,
         take_binary},
        {"max", "onednn_binary", "a jit kernel (float32: not oneDNN's reference code, e.g. a broadcast over a middle axis; codegen runs those)", true,
         take_binary},
        {"min", "onednn_binary", "a jit kernel (float32: not oneDNN's reference code, e.g. a broadcast over a middle axis; codegen runs those)", true,
         take_binary},
        {"other", "onednn_eltwise", "elementwise ops with a oneDNN algorithm (not log, softplus)", true,
         lower_eltwise},
    };
    return list;
}

namespace {

// The own int8 kernels' rules, by the name their op candidates carry.
struct int8_rule {
    const char* name;
    bool (*takes)(module& m, instruction_ref ins, const cpu_options& o);
};
constexpr int8_rule int8_rules[] = {{"int8_gemm", int8_gemm_takes}, {"int8_depthwise", int8_depthwise_takes}};

}  // namespace

const char* own_int8_kernel_for(module& m, instruction_ref ins, const cpu_options& o) {
    const std::string n = ins->name();
    for (const auto& c : op_candidates()) {
        if (!names(c, n)) continue;
        for (const auto& r : int8_rules)
            if (std::string(c.name) == r.name && r.takes(m, ins, o)) return c.name;
    }
    return nullptr;
}

std::string anchor_kind(const anchor_plan& p) {
    if (p.op.any_cast<convolution>()) return "convolution";
    if (p.op.any_cast<matmul>()) return "matmul";
    return {};
}

std::string lower_anchor(anchor_site& site) {
    const auto kind = anchor_kind(site.plan);
    if (site.env.ctx.options().exhaustive_tune) {
        // The measured choice, taken whenever it can (not only where its rules would); the
        // rules decide when it cannot (a record from another version of a kernel).
        if (auto r = tuned_choice(site)) {
            for (const auto& c : anchor_candidates())
                if (c.anchor == kind && r->chosen == c.name && c.lower(site, false)) {
                    site.env.ctx.note_instruction(&*site.pos, tuning_note(*r));
                    return c.name;
                }
            if (r->chosen == rules_choice)  // measured, and no other enough faster: the rules'
                for (const auto& c : anchor_candidates())
                    if (c.anchor == kind && c.lower(site, true)) {
                        site.env.ctx.note_instruction(&*site.pos, tuning_note(*r));
                        return c.name;
                    }
        }
    }
    for (const auto& c : anchor_candidates())
        if (c.anchor == kind && c.lower(site, true)) return c.name;
    return {};
}

std::string lower_op(lower_env& env, instruction_ref ins) {
    if (ins->is_param() || ins->is_literal() || ins->is_return()) return {};
    if (ins->get_operator().traits().builtin || !ins->module_inputs().empty()) return {};
    if (is_cpu_kernel(ins)) return {};
    if (env.ctx.options().exhaustive_tune)  // a quantized product's measured int8 kernel (tuning_int8.hpp)
        if (const char* tuned = lower_tuned_int8(env, ins)) return tuned;
    const std::string n = ins->name();  // the table's key
    const auto& list = op_candidates();
    bool named = false;
    for (const auto& c : list) named = named || names(c, n);
    std::optional<bool> static_f32;
    for (const auto& c : list) {
        if (!(named ? names(c, n) : std::string(c.op) == "other")) continue;
        if (c.f32_static) {
            if (!static_f32) static_f32 = all_f32_static(ins);
            if (!*static_f32) continue;
        }
        if (c.lower(env, ins)) return c.name;
    }
    return {};
}

std::string selection_table_markdown() {
    std::string out = "| op | kernel | taken when |\n|---|---|---|\n";
    auto row = [&](const std::string& op, const std::string& name, const std::string& rule) {
        out += "| " + op + " | " + name + " | " + (rule.empty() ? "oneDNN has a kernel for it" : rule) + " |\n";
    };
    for (const auto& c : anchor_candidates()) row(c.anchor, c.name, c.rule);
    for (const auto& c : op_candidates()) row(c.op, c.name, c.rule);
    return out;
}

}  // namespace kiln::cpu
