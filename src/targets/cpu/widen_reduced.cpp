#include "targets/cpu/widen_reduced.hpp"

#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "ops/nn_conv.hpp"
#include "ops/nn_matmul.hpp"

#include "ops/convert.hpp"
#include "passes/dead_code_elimination.hpp"

#include <iostream>
#include <mutex>
#include <unordered_map>

namespace kiln::cpu {

namespace {

bool is_16bit_float(const shape& s) {
    return s.is_tensor() && (s.get_type() == type::float16 || s.get_type() == type::bfloat16);
}

// The float32 input a convert to 16 bits reads, or nullptr.
const op::convert_op* narrowing_convert(instruction_ref ins) {
    const auto* c = ins->get_operator().any_cast<op::convert_op>();
    if (c == nullptr || !is_16bit_float(ins->get_shape())) return nullptr;
    const auto& in = ins->inputs().at(0)->get_shape();
    return in.is_tensor() && in.get_type() == type::float32 ? c : nullptr;
}

// Once per process: oneDNN would emulate bf16 here, slower than float32.
void warn_no_native_bf16() {
    static std::once_flag once;
    std::call_once(once, [] {
        std::cerr << "[kiln] warning: this CPU has no native bf16 (AVX512-BF16 or AMX): bfloat16 convolutions run "
                     "on float32 kernels (with the bf16 weights)\n";
    });
}

literal widen_literal(const literal& l) {
    const shape out = l.get_shape().with_type(type::float32);
    return literal(op::convert_op{type::float32}.compute(out, {l.get_argument()}));
}

}  // namespace

void widen_reduced_precision::apply(module& m) const {
    std::unordered_map<const instruction*, instruction_ref> wide;  // 16-bit value -> float32 twin
    auto widen = [&](instruction_ref x) {
        if (auto it = wide.find(&*x); it != wide.end()) return it->second;
        instruction_ref w;
        if (x->is_literal()) w = m.insert_literal(std::next(x), widen_literal(x->get_literal()));
        else if (narrowing_convert(x)) w = x->inputs().at(0);  // the rounding is skipped
        else w = m.insert_instruction(std::next(x), op::convert_op{type::float32}, {x});
        wide.emplace(&*x, w);
        return w;
    };
    for (auto ins = m.begin(); ins != m.end();) {
        auto next = std::next(ins);
        const auto* conv = ins->get_operator().any_cast<op::convert_op>();
        if (conv && conv->target_type == type::float32 && is_16bit_float(ins->inputs().at(0)->get_shape())) {
            // A convert back to float32 of a value computed in float32 here: that value.
            auto in = ins->inputs().at(0);
            if (wide.count(&*in) || narrowing_convert(in)) m.replace_instruction(ins, widen(in));
            ins = next;
            continue;
        }
        if (conv || ins->is_param() || ins->is_literal() || ins->is_return() || !ins->module_inputs().empty() ||
            !is_16bit_float(ins->get_shape())) {
            ins = next;
            continue;
        }
        std::vector<instruction_ref> args;
        for (auto x : ins->inputs()) args.push_back(is_16bit_float(x->get_shape()) ? widen(x) : x);
        instruction_ref f32;
        try {
            f32 = m.insert_instruction(ins, ins->get_operator(), args);
        } catch (const std::exception&) {
            ins = next;  // the op takes no float32 (none does today): left as it is
            continue;
        }
        if (f32->get_shape().get_type() != type::float32) {  // a result type fixed by an attribute
            m.remove_instruction(f32);
            ins = next;
            continue;
        }
        if (ctx && ins->get_shape().get_type() == type::bfloat16 && ctx->options().bf16) {
            const auto& op = ins->get_operator();
            const bool conv = op.any_cast<op::convolution>() != nullptr;
            const bool product = op.any_cast<op::matmul>() != nullptr || op.any_cast<op::gemm>() != nullptr;
            if ((conv || product) && !has_native_bf16()) warn_no_native_bf16();
            else if (conv) ctx->bf16_convolutions = true;
            else if (product) ctx->bf16_matmuls = true;
        }
        auto narrow = m.insert_instruction(ins, op::convert_op{ins->get_shape().get_type()}, {f32});
        m.replace_instruction(ins, narrow);
        wide.emplace(&*narrow, f32);
        ins = next;
    }
    dead_code_elimination{}.apply(m);
}

}  // namespace kiln::cpu
