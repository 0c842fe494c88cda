#include "passes/propagate_constants.hpp"

#include <kiln/context.hpp>

namespace kiln {

namespace {
constexpr std::size_t growth_allowance = 64 * 1024;  // bytes a fold may add beyond its inputs

bool foldable(const instruction& ins) {
    if (ins.is_param() || ins.is_literal() || ins.is_return() || ins.inputs().empty()) return false;
    if (!ins.module_inputs().empty()) return false;
    const auto& op = ins.get_operator();
    auto t = op.traits();
    if (t.nondeterministic || t.side_effects || t.builtin || !op.has_compute()) return false;
    const auto& s = ins.get_shape();
    if (!s.is_tensor() || s.dynamic()) return false;
    std::size_t in_bytes = 0;
    for (auto in : ins.inputs()) {
        if (!in->is_literal()) return false;
        in_bytes += in->get_shape().bytes();
    }
    return s.bytes() <= 2 * in_bytes + growth_allowance;
}
}  // namespace

void propagate_constants::apply(module& m) const {
    host_context ctx;
    for (auto ins = m.begin(); ins != m.end(); ++ins) {
        if (!foldable(*ins)) continue;
        std::vector<argument> args;
        for (auto in : ins->inputs()) args.push_back(in->get_literal().get_argument());
        argument r = ins->get_operator().compute(ctx, ins->get_shape(), args);
        if (!r.get_shape().same_lens_and_type(ins->get_shape())) continue;  // defensive: keep the op
        auto lit = m.insert_literal(ins, literal(r));
        m.replace_instruction(ins, lit);
    }
}

}  // namespace kiln
