// simplify_algebra: Pad ops that cost a pass over the tensor for nothing.
//
// Exporters write Pad where the framework's layer pads: PyTorch's AvgPool2d with
// count_include_pad and padding becomes Pad + AveragePool (MaxViT), DenseNet's
// transitions get a Pad of all zeros, Swin pads its windows by amounts that are zero at
// sizes divisible by the window. A Pad of zeros is the identity; a zero Pad before a
// convolution or an average pooling that counts padding is that op's own padding, which
// its kernel applies while it reads (no copy).
#include "passes/rewrite_utils.hpp"
#include "passes/simplify_algebra_rules.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/tensor_slice.hpp"

#include <algorithm>

namespace kiln::algebra {

namespace {

using rewrite::is;

// The pads of `p` over every axis ({begin..., end...}) when it pads with the value 0
// (mode constant, no value input or a constant zero); nullopt otherwise.
std::optional<std::vector<std::int64_t>> zero_fill_pads(instruction_ref p) {
    const auto* o = p->get_operator().any_cast<op::pad>();
    if (o == nullptr || !o->fills_with_value()) return std::nullopt;
    if (p->inputs().size() == 2) {
        auto v = rewrite::constant_of(p->inputs()[1]);
        if (!v || !rewrite::all_equal(*v, 0.0)) return std::nullopt;
    }
    return op::expand_pads(o->pads, o->axes, p->inputs()[0]->get_shape().ndim(), "pad");
}

// The spatial padding {begin..., end...} of an op whose attribute may be empty (no
// padding) plus the spatial part of Pad's `pads`; nullopt when the Pad touches the batch
// or channel axes or crops (negative pads).
std::optional<std::vector<std::int64_t>> merged_padding(const std::vector<std::int64_t>& own,
                                                        const std::vector<std::int64_t>& pads) {
    const std::size_t rank = pads.size() / 2;
    if (rank < 3) return std::nullopt;
    const std::size_t spatial = rank - 2;
    if (!own.empty() && own.size() != 2 * spatial) return std::nullopt;
    for (std::size_t d : {std::size_t{0}, std::size_t{1}})
        if (pads[d] != 0 || pads[rank + d] != 0) return std::nullopt;
    if (std::any_of(pads.begin(), pads.end(), [](std::int64_t v) { return v < 0; })) return std::nullopt;
    std::vector<std::int64_t> r(2 * spatial);
    for (std::size_t i = 0; i < spatial; ++i) {
        r[i] = (own.empty() ? 0 : own[i]) + pads[2 + i];
        r[spatial + i] = (own.empty() ? 0 : own[spatial + i]) + pads[rank + 2 + i];
    }
    return r;
}

}  // namespace

// pad(x) with every pad 0 -> x (any mode: nothing is added).
bool remove_zero_pad(module& m, instruction_ref ins) {
    const auto* o = ins->get_operator().any_cast<op::pad>();
    if (o == nullptr || ins->outputs().empty()) return false;
    auto x = ins->inputs()[0];
    auto pads = op::expand_pads(o->pads, o->axes, x->get_shape().ndim(), "pad");
    if (std::any_of(pads.begin(), pads.end(), [](std::int64_t v) { return v != 0; })) return false;
    if (x->get_shape() != ins->get_shape()) return false;
    m.replace_instruction(ins, x);
    return true;
}

// convolution(pad(x, 0), w) -> convolution{padding + pads}(x, w), and the same for an
// average pooling that counts the padding (or has none of its own, so that every
// element it averaged was real or Pad's zero): the kernel treats the outside as 0 and
// divides by the whole window, as it did over the padded copy. Not with ceil_mode, where
// a window may run past the padding and kernels differ on what they count.
bool fold_pad_into_window(module& m, instruction_ref ins) {
    if (ins->inputs().empty()) return false;
    auto p = ins->inputs()[0];
    if (!is<op::pad>(p)) return false;
    auto pads = zero_fill_pads(p);
    if (!pads) return false;
    auto x = p->inputs()[0];
    auto args = ins->inputs();
    args[0] = x;
    if (const auto* c = ins->get_operator().any_cast<op::convolution>()) {
        if (c->padding_mode != op::pad_mode::explicit_pads) return false;
        auto padding = merged_padding(c->padding, *pads);
        if (!padding) return false;
        auto folded = *c;
        folded.padding = *padding;
        m.replace_instruction(ins, folded, args);
        return true;
    }
    if (const auto* pool = ins->get_operator().any_cast<op::pooling>()) {
        if (pool->mode != op::pooling_mode::average || pool->global || pool->ceil_mode ||
            pool->padding_mode != op::pad_mode::explicit_pads)
            return false;
        const bool own_padding =
            std::any_of(pool->padding.begin(), pool->padding.end(), [](std::int64_t v) { return v != 0; });
        if (own_padding && !pool->count_include_pad) return false;
        auto padding = merged_padding(pool->padding, *pads);
        if (!padding) return false;
        auto folded = *pool;
        folded.padding = *padding;
        folded.count_include_pad = true;
        m.replace_instruction(ins, folded, args);
        return true;
    }
    return false;
}

}  // namespace kiln::algebra
