#include "targets/gpu/lowering.hpp"

#include "codegen/plan.hpp"
#include "passes/attention_match.hpp"
#include "passes/fuse_pointwise.hpp"
#include "targets/gpu/selection.hpp"

#include <kiln/errors.hpp>

#include <vector>

namespace kiln::gpu {

pass make_fusion_pass(const gpu_options& o) {
    fuse_pointwise f;
    f.supported = [](instruction_ref ins) { return kiln::codegen::kernel_can_run(ins, true); };
    f.reductions = true;  // reduction groups become one kernel each too (layer norm, spelled-out softmax)
    if (!o.fusion) f.min_size = static_cast<std::size_t>(-1);
    return f;
}

void fuse_attention::apply(module& m) const {
    if (!options) throw_error(error_code::runtime, name() + ": made without the gpu context's options");
    std::vector<instruction_ref> softmaxes;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (attention_match::match_at(ins)) softmaxes.push_back(ins);
    for (auto sm : softmaxes) (void)lower_attention(m, sm, *options);
}

void lowering::apply(module& m) const {
    if (!options) throw_error(error_code::runtime, name() + ": made without the gpu context's options");
    std::vector<instruction_ref> all;
    for (auto ins = m.begin(); ins != m.end(); ++ins) all.push_back(ins);
    for (auto ins : all) (void)lower_instruction(m, ins, *options);
}

}  // namespace kiln::gpu
