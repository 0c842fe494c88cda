#include "targets/cpu/tuning_int8.hpp"

#include "targets/cpu/kernels/int8_depthwise/int8_depthwise.hpp"
#include "targets/cpu/kernels/int8_gemm/int8_gemm.hpp"
#include "targets/cpu/kernels/onednn/op_quant.hpp"
#include "targets/cpu/sum_post_op.hpp"
#include "targets/cpu/tuning.hpp"

#include "ops/quant_fused.hpp"
#include "passes/rewrite_utils.hpp"

#include <span>

namespace kiln::cpu {

namespace {

// The names are the op candidates' (selection.cpp), in their order.
// `fits`: whether it can take ins, checked before any trial is built (nullptr: only its trial
// tells, as for oneDNN's).
struct int8_candidate {
    const char* name;
    bool (*lower)(lower_env& env, instruction_ref ins);
    bool (*fits)(instruction_ref ins, const cpu_options& o);
};
bool depthwise_fits(instruction_ref ins, const cpu_options&) { return int8_depthwise_fits(ins); }
constexpr int8_candidate convolution_candidates[] = {
    {"int8_depthwise", lower_int8_depthwise_anywhere, depthwise_fits},
    {"int8_gemm_vnni", lower_int8_gemm_vnni_anywhere, int8_gemm_vnni_fits},
    {"onednn_int8", lower_quant_convolution, nullptr}};

// The candidates for ins, empty for anything else or where the rules are the user's
// (KILN_CPU_INT8_KERNELS set) or the CPU has no int8 dot product (dequantize_without_vnni
// decided).
std::span<const int8_candidate> candidates_for(const lower_env& env, instruction_ref ins) {
    if (env.ctx.options().int8_kernels != int8_kernel_choice::automatic || !has_int8_dot_product()) return {};
    const auto& s = ins->get_shape();
    if (!s.is_tensor() || s.dynamic()) return {};
    // Convolutions only. Products (quant_dot) keep their rule: bert_small_qdq's, measured in
    // trials, took oneDNN's int8 matmul (13% faster there: 0.035 against 0.041 ms) and ran it
    // ~3x slower in the network (~0.1 ms each), the fused kernels around it slower too: the
    // whole run 2.9 / 3.2 ms (min / median of 5 alternating rounds) against 1.9 / 2.4 untuned.
    if (ins->get_operator().any_cast<op::quant_convolution>()) return convolution_candidates;
    return {};
}

// The op without what does not change the kernels' work: the scales (per channel or not
// kept), zero points and saturation range (layers of one shape share a record).
std::string problem_op(instruction_ref ins) {
    auto blank = [](op::requantize_params& p) {
        const bool per_channel = p.w_scales.size() > 1;
        p.x_scale = p.y_scale = 1.0f;
        p.x_zero_point = p.y_zero_point = p.y_min = p.y_max = 0;
        p.w_scales.assign(per_channel ? 2 : 1, 1.0f);  // two: per channel
    };
    if (const auto* q = ins->get_operator().any_cast<op::quant_convolution>()) {
        auto c = *q;
        blank(c);
        c.r_scale = 1.0f;
        c.r_zero_point = 0;
        return operation(c).to_string();
    }
    auto d = ins->get_operator().get<op::quant_dot>();
    blank(d);
    return operation(d).to_string();
}

// The trial of candidate c: ins's operands as buffers (literals as they are), ins itself,
// lowered by c; its result read by nothing but the return where it is a program result.
trial_candidate trial_of(lower_env& env, instruction_ref ins, const int8_candidate& c) {
    return {c.name, [&env, ins, lower = c.lower](lower_env& scratch) {
                std::vector<instruction_ref> args;
                for (auto x : ins->inputs()) {
                    if (x->is_literal()) args.push_back(scratch.m.add_literal(x->get_literal()));
                    else args.push_back(trial_operand(scratch, env, x, may_write_into(env, x, ins, {})));
                }
                auto q = scratch.m.add_instruction(ins->get_operator(), args);
                // Not a result where the program's is none: the kernels write it channels-last then.
                scratch.m.add_return({rewrite::is_output(env.m, ins) ? q : args.front()});
                return lower(scratch, q);
            }};
}

}  // namespace

std::string int8_tuning_key(const lower_env& env, instruction_ref ins) {
    const auto list = candidates_for(env, ins);
    if (list.empty()) return {};
    std::string names;
    for (const auto& c : list) names += (names.empty() ? "" : ",") + std::string(c.name);
    std::string key = tuning_machine_key(env.ctx) + "|" + ins->name() + "[" + names + "]|" + problem_op(ins) + "|";
    for (auto x : ins->inputs()) {
        key += x->get_shape().to_string();
        if (auto it = env.layout.find(&*x); it != env.layout.end()) key += " in " + to_value(it->second).to_string();
        key += x->is_literal() ? " const;" : ";";
    }
    return key + "|" + ins->get_shape().to_string() + (rewrite::is_output(env.m, ins) ? " result" : "");
}

const char* lower_tuned_int8(lower_env& env, instruction_ref ins) {
    const auto list = candidates_for(env, ins);
    if (list.empty()) return nullptr;
    auto& table = env.ctx.tuning();
    const auto key = int8_tuning_key(env, ins);
    auto r = table.find(key);
    if (!r) {
        // Nothing built where fewer than two may take it (a residual convolution: oneDNN's alone).
        std::vector<trial_candidate> trials;
        for (const auto& c : list)
            if (!c.fits || c.fits(ins, env.ctx.options())) trials.push_back(trial_of(env, ins, c));
        if (trials.size() < 2) return nullptr;
        // The rules' own choice stays unless another is enough faster (tuning.cpp, rule_margin):
        // on a VNNI CPU the VNNI GEMM where its rule takes the product, else oneDNN's kernel.
        const char* rule = int8_gemm_vnni_takes(env.m, ins, env.ctx.options()) ? "int8_gemm_vnni" : "onednn_int8";
        r = measure_candidates(env.ctx, trials, rule);
        if (!r) return nullptr;
        table.record(key, *r);
    }
    // The measured choice wherever it can take the instruction; the rules where it cannot (a
    // record from another version of a kernel).
    for (const auto& c : list)
        if (r->chosen == c.name && c.lower(env, ins)) {
            env.ctx.note_instruction(&*ins, tuning_note(*r));
            return c.name;
        }
    return nullptr;
}

}  // namespace kiln::cpu
