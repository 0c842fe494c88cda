#include "targets/cpu/bf16_activations.hpp"

#include "targets/cpu/context.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/op_conv.hpp"
#include "targets/cpu/kernels/onednn/op_misc.hpp"
#include "ops/nn_pooling.hpp"

#include <kiln/builtin_ops.hpp>

#include <algorithm>
#include <unordered_set>
#include <vector>

namespace kiln::cpu {

namespace {

const convolution* bf16_conv(instruction_ref ins) {
    const auto* c = ins->get_operator().any_cast<convolution>();
    return c && c->in_bf16(!c->weights.empty()) ? c : nullptr;
}

bool has_sum(const convolution& c) { return has_sum_post_op(c.post_ops); }

dnnl::memory::desc layout_as(const md_record& layout, dnnl::memory::data_type t) { return retyped(layout.to_md(), t); }

// Whether c's result could be bf16 on its own terms: a planned layout that holds it in
// exactly elements x 2 bytes (no padded channels: a convolution summing into it checks
// its buffer by the logical shape's bytes), and its output buffer an allocate only it
// reads or, with a sum post-op, the residual it adds to.
bool may_write_bf16(instruction_ref ins, const convolution& c) {
    if (c.dst_layout.empty() || c.dw.active()) return false;
    if (layout_as(c.dst_layout, dnnl::memory::data_type::bf16).get_size() != ins->get_shape().elements() * 2)
        return false;
    const auto buf = ins->inputs().back();
    if (has_sum(c)) return !buf->get_operator().any_cast<builtin::allocate>();
    return buf->get_operator().any_cast<builtin::allocate>() && buf->outputs().size() == 1;
}

using member_set = std::unordered_set<const instruction*>;

// How u reads r: as a bf16 convolution's source (position 0, nowhere else), as the
// residual a bf16 convolution sums into (its output buffer), or otherwise.
enum class reading { source, residual, other };

reading how_read(instruction_ref u, instruction_ref r);

// A max pooling on oneDNN read only as bf16 convolutions' source (ResNet's stem pool):
// it can pool the bf16 values as they are, and its result stay bf16. Exact: rounding to
// bf16 is monotonic, so the max of rounded values is the rounded max.
bool bf16_pool(instruction_ref p) {
    const auto* op = p->get_operator().any_cast<pooling>();
    if (!op || op->dst_layout.empty() || op->layouts.empty() || op->scratchpad >= 0) return false;
    const auto* mode = op->op.any_cast<kiln::op::pooling>();
    if (!mode || mode->mode != kiln::op::pooling_mode::max || p->inputs().size() != 2) return false;
    const auto buf = p->inputs().back();
    if (!buf->get_operator().any_cast<builtin::allocate>() || buf->outputs().size() != 1) return false;
    if (layout_as(op->dst_layout, dnnl::memory::data_type::bf16).get_size() != p->get_shape().elements() * 2)
        return false;
    if (p->outputs().empty()) return false;
    for (auto u : p->outputs())
        if (!bf16_conv(u) || how_read(u, p) != reading::source) return false;
    return true;
}

reading how_read(instruction_ref u, instruction_ref r) {
    if (u->inputs().front() == r && bf16_pool(u)) return reading::source;
    const auto* c = bf16_conv(u);
    if (!c) return reading::other;
    const auto& in = u->inputs();
    if (in.back() == r && has_sum(*c)) return std::count(in.begin(), in.end(), r) == 1 ? reading::residual : reading::other;
    return in.front() == r && std::count(in.begin(), in.end(), r) == 1 ? reading::source : reading::other;
}

// Whether r (in `bf16`) keeps its place: whatever sums into it writes bf16 too (one
// buffer), so does the residual r sums into, and the bf16 result pays: some bf16
// convolution reads it as its source, or it is part of a residual chain.
bool still_fits(instruction_ref r, const member_set& bf16) {
    bool pays = has_sum(*bf16_conv(r));
    for (auto u : r->outputs()) {
        const auto how = how_read(u, r);
        if (how == reading::residual && !bf16.count(&*u)) return false;
        pays = pays || how != reading::other;
    }
    return pays && (!has_sum(*bf16_conv(r)) || bf16.count(&*r->inputs().back()));
}

// Gives the readers of r that cannot take bf16 a float32 copy in r's layout (r is still
// float32 here; `layout` is its planned one).
void widen_for_other_readers(module& m, instruction_ref r, const md_record& layout) {
    std::vector<instruction_ref> others;
    for (auto u : r->outputs())
        if (how_read(u, r) == reading::other && std::find(others.begin(), others.end(), u) == others.end())
            others.push_back(u);
    if (others.empty()) return;
    reorder widen;
    widen.layouts = {md_record::from(layout_as(layout, dnnl::memory::data_type::bf16))};
    widen.dst_layout = layout;
    const auto pos = std::next(r);
    auto buf = m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {layout.to_md().get_size()})}, {});
    auto copy = m.insert_instruction(pos, widen, {r, buf});
    for (auto u : others) m.replace_argument(u, r, copy);
}

}  // namespace

void keep_bf16_activations::apply(module& m) const {
    if (!ctx || !ctx->bf16_convolutions || !ctx->options().bf16_activations || !has_native_bf16()) return;
    // The largest set closed under still_fits: start from every candidate and drop what
    // does not fit until nothing changes (a residual chain stays or goes as a whole).
    std::vector<instruction_ref> members;
    member_set bf16;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (const auto* c = bf16_conv(ins); c && may_write_bf16(ins, *c)) {
            members.push_back(ins);
            bf16.insert(&*ins);
        }
    for (bool changed = true; changed;) {
        changed = false;
        for (auto r : members)
            if (bf16.count(&*r) && !still_fits(r, bf16)) {
                bf16.erase(&*r);
                changed = true;
            }
    }
    // The pools that read a result about to be bf16 pool in bf16 (their readers take it as a
    // source); first, so that their result is bf16 by their layout when their source turns.
    std::vector<instruction_ref> pools;
    for (auto ins = m.begin(); ins != m.end(); ++ins)
        if (!ins->inputs().empty() && bf16.count(&*ins->inputs().front()) && bf16_pool(ins)) pools.push_back(ins);
    for (auto p : pools) {
        auto op = *p->get_operator().any_cast<pooling>();
        op.dst_layout = md_record::from(layout_as(op.dst_layout, dnnl::memory::data_type::bf16));
        auto args = p->inputs();
        args.back() = m.insert_instruction(p, builtin::allocate{shape(type::uint8, {op.dst_layout.to_md().get_size()})}, {});
        m.replace_instruction(p, op, args);
    }
    // Last first: a convolution summing into r then already writes bf16 when r's new
    // type reaches it, and its readers already take a bf16 source.
    for (auto it = members.rbegin(); it != members.rend(); ++it) {
        const auto ins = *it;
        if (!bf16.count(&*ins)) continue;
        auto c = *bf16_conv(ins);
        widen_for_other_readers(m, ins, c.dst_layout);
        c.dst_layout = md_record::from(layout_as(c.dst_layout, dnnl::memory::data_type::bf16));
        auto args = ins->inputs();
        if (!has_sum(c)) {
            const auto bytes = c.dst_layout.to_md().get_size();
            args.back() = m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {bytes})}, {});
        }
        m.replace_instruction(ins, c, args);
    }
}

}  // namespace kiln::cpu
