#include "targets/cpu/sum_post_op.hpp"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <unordered_map>

namespace kiln::cpu {

namespace {

// Each instruction's place in the module (program order).
using positions = std::unordered_map<const instruction*, std::size_t>;

positions positions_of(const module& m) {
    positions at;
    std::size_t i = 0;
    for (const auto& ins : m) at.emplace(&ins, i++);
    return at;
}

// Every reader of r other than `last` and `skip` comes before `last`, none is the return,
// and the same holds for the readers of any view of r among them (a view read after
// `last` would see the overwritten buffer).
bool read_only_before(instruction_ref r, instruction_ref last, const std::vector<instruction_ref>& skip,
                      const positions& at) {
    const std::size_t end = at.at(&*last);
    for (auto u : r->outputs()) {
        if (u == last || std::find(skip.begin(), skip.end(), u) != skip.end()) continue;
        if (u->is_return() || at.at(&*u) >= end) return false;
        const auto alias = u->get_operator().output_alias(to_shapes(u->inputs()));
        if (alias >= 0 && static_cast<std::size_t>(alias) < u->inputs().size() && u->inputs()[alias] == r &&
            !read_only_before(u, last, skip, at))
            return false;
    }
    return true;
}

// r is a cpu op's result written into a planned buffer that nothing but r's chain names:
// its last input (its output buffer) is an allocate only it reads, or a value with the
// same property whose other readers all run before r (a block's residual written into
// the residual before it, as ResNet's chain of blocks does).
bool owns_planned_buffer(instruction_ref r, const positions& at) {
    if (r->is_param() || r->is_literal() || !is_cpu_kernel(r) || r->inputs().empty()) return false;
    if (r->get_operator().output_alias(to_shapes(r->inputs())) != static_cast<std::ptrdiff_t>(r->inputs().size()) - 1)
        return false;
    const auto buf = r->inputs().back();
    if (buf->get_operator().any_cast<builtin::allocate>()) return buf->outputs().size() == 1;
    return owns_planned_buffer(buf, at) && read_only_before(buf, r, {}, at);
}

// Post-op i (a binary add of operand `in`) becomes the in-place sum: its operand leaves
// `operands`, and the later binary inputs are renumbered.
void rewrite_as_sum(std::vector<post_op>& post_ops, std::vector<instruction_ref>& operands, std::size_t i) {
    const auto in = post_ops[i].input;
    post_ops[i] = post_op{"sum", "", 0.0f, 0.0f, -1};
    for (auto& p : post_ops)
        if (p.kind == "binary" && p.input > in) --p.input;
    operands.erase(operands.begin() + static_cast<std::ptrdiff_t>(in));
}

}  // namespace

std::optional<instruction_ref> residual_for_sum(lower_env& env, std::vector<post_op>& post_ops,
                                                std::vector<instruction_ref>& operands, const md_record& dst_layout,
                                                instruction_ref pos, const std::vector<instruction_ref>& replaced,
                                                const std::function<bool(std::size_t)>& accept) {
    if (!env.ctx.options().sum_post_op || dst_layout.empty()) return std::nullopt;
    const auto out_bytes = dst_layout.to_md().get_size();
    std::optional<positions> at;  // built once, when a candidate gets that far
    for (std::size_t i = 0; i < post_ops.size(); ++i) {
        const auto& po = post_ops[i];
        if (po.kind != "binary" || po.algorithm != "add" || po.input < 0) continue;
        const auto in = static_cast<std::size_t>(po.input);
        if (in >= operands.size()) continue;
        const auto r = operands[in];
        if (std::count(operands.begin(), operands.end(), r) != 1) continue;
        if (!at) at = positions_of(env.m);
        if (!owns_planned_buffer(r, *at)) continue;
        const auto lay = env.layout.find(&*r);
        if (lay == env.layout.end() || !same_layout(lay->second, dst_layout)) continue;
        if (r->inputs().back()->get_shape().bytes() < out_bytes || r->get_shape().bytes() < out_bytes) continue;
        if (!read_only_before(r, pos, replaced, *at)) continue;
        if (!accept(i)) continue;

        rewrite_as_sum(post_ops, operands, i);
        return r;
    }
    return std::nullopt;
}

bool may_write_into(lower_env& env, instruction_ref r, instruction_ref pos, const std::vector<instruction_ref>& replaced) {
    const auto at = positions_of(env.m);
    return owns_planned_buffer(r, at) && read_only_before(r, pos, replaced, at);
}

std::optional<instruction_ref> sum_into_residual(lower_env& env, convolution& op, std::vector<instruction_ref>& operands,
                                                 const shape& dst, instruction_ref pos,
                                                 const std::vector<instruction_ref>& replaced) {
    if (op.dw.active()) return std::nullopt;
    // oneDNN must build the fused kernel without falling back to its reference code.
    auto accept = [&](std::size_t i) {
        convolution cand = op;
        auto ops = operands;
        rewrite_as_sum(cand.post_ops, ops, i);
        cand.layouts = operand_layouts(env, ops);
        try {
            return impl_name(cand.make_pd(env.ctx.engine(), to_shapes(ops), dst)).find("ref") == std::string::npos;
        } catch (const dnnl::error&) {
            return false;
        } catch (const error& e) {
            if (e.code() == error_code::unsupported) return false;
            throw;
        }
    };
    auto r = residual_for_sum(env, op.post_ops, operands, op.dst_layout, pos, replaced, accept);
    if (r) op.layouts = operand_layouts(env, operands);
    return r;
}

}  // namespace kiln::cpu
