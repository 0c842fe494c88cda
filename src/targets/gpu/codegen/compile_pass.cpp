#include "targets/gpu/codegen/compile_pass.hpp"

#include "codegen/plan.hpp"
#include "targets/gpu/codegen/device_header.hpp"
#include "targets/gpu/codegen/emit_attention.hpp"
#include "targets/gpu/codegen/emit_lstm.hpp"
#include "targets/gpu/codegen/emit.hpp"
#include "targets/gpu/codegen/emit_move.hpp"
#include "targets/gpu/codegen/nvrtc.hpp"
#include "targets/gpu/kernels/fused_kernel.hpp"

#include <kiln/errors.hpp>

#include <chrono>
#include <iostream>
#include <map>

namespace kiln::gpu::codegen {

namespace {

std::vector<instruction_ref> kernels_of(module& m) {
    std::vector<instruction_ref> out;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (ins->get_operator().any_cast<fused_kernel>()) out.push_back(ins);
    return out;
}

// Attention bodies (emit_attention.hpp), LSTM recurrences (emit_lstm.hpp), data-movement bodies (emit_move.hpp) or
// elementwise and reduction plans (emit.hpp).
std::string source_of(instruction_ref ins, const std::string& name) {
    const auto& k = ins->get_operator().get<fused_kernel>();
    auto inputs = to_shapes(ins->inputs());
    inputs.pop_back();  // the output buffer
    const auto out = ins->get_shape().as_standard();
    if (attention_form_of(k.body)) return emit_attention_kernel(k.body, inputs, name);
    if (is_lstm(k.body)) return emit_lstm_kernel(k.body, inputs, name);
    if (is_move(k.body, inputs)) return emit_move_kernel(k.body, inputs, out, name);
    return emit_kernel(kiln::codegen::make_plan(k.body, inputs, out, k.fast_math), name);
}

}  // namespace

std::string module_source(module& m) {
    std::map<std::string, std::string> texts;
    for (auto ins : kernels_of(m)) {
        const auto& k = ins->get_operator().get<fused_kernel>();
        if (!texts.count(k.symbol)) texts[k.symbol] = source_of(ins, k.symbol);
    }
    std::vector<std::string> kernels;
    for (auto& [symbol, text] : texts) kernels.push_back(text);
    return device_source(kernels);
}

void compile_kernels::apply(module& m) const {
    if (!options) throw_error(error_code::runtime, name() + ": made without the gpu context's options");
    const auto kernels = kernels_of(m);
    if (kernels.empty()) return;
    const auto start = std::chrono::steady_clock::now();
    const std::string source = module_source(m);
    const auto built = compile_cuda(source, options->arch, options->fast_math, options->cache_dir);
    bool first = true;
    for (auto ins : kernels) {
        auto k = ins->get_operator().get<fused_kernel>();
        k.library = built.key;
        k.arch = options->arch;
        if (first) {
            k.source = value::binary{source};
            k.cubin = value::binary{built.cubin};
            k.ptx = value::binary{built.ptx};
            first = false;
        }
        m.replace_instruction(ins, k, ins->inputs());
    }
    if (options->codegen_verbose) {
        std::cerr << "[kiln] gpu codegen: module " << m.name() << ": " << kernels.size() << " fused kernels, "
                  << (built.cached ? "from the cache" : "compiled by NVRTC") << " for " << options->arch << " in "
                  << std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count()
                  << " ms\n";
        for (const auto& u : built.usage)
            if (u.spills())
                std::cerr << "[kiln] gpu codegen: " << u.function << " spills " << u.spill_stores << " bytes to local memory\n";
    }
}

}  // namespace kiln::gpu::codegen
