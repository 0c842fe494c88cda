#include "targets/cpu/kernels/channel_affine/channel_affine.hpp"

#include "targets/cpu/kernels/pixel_placement.hpp"

#include "ops/normalization.hpp"
#include "ops/pointwise_unary.hpp"
#include "ops/tensor_slice.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <optional>
#include <string>

namespace kiln::cpu {

namespace {

// y[p * ys + j] = x[p * xs + j] * a[j] + b[j] (then max with 0) for `len` channels stored
// side by side at each of `pixels` pixels (channels-last rows, or a channel block).
__attribute__((target_clones("avx512f", "avx2", "default"))) void affine_rows(const float* x, std::size_t xs, float* y,
                                                                              std::size_t ys, const float* a,
                                                                              const float* b, std::size_t pixels,
                                                                              std::size_t len, bool relu) {
    for (std::size_t p = 0; p < pixels; ++p) {
        const float* xp = x + p * xs;
        float* yp = y + p * ys;
        if (relu) {
#pragma omp simd
            for (std::size_t j = 0; j < len; ++j) yp[j] = std::max(xp[j] * a[j] + b[j], 0.0f);
        } else {
#pragma omp simd
            for (std::size_t j = 0; j < len; ++j) yp[j] = xp[j] * a[j] + b[j];
        }
    }
}

// One channel over `pixels` pixels, xs and ys apart: contiguous between plain tensors, a
// transpose where one side stores channels per pixel and the other does not.
__attribute__((target_clones("avx512f", "avx2", "default"))) void affine_channel(const float* x, std::size_t xs,
                                                                                 float* y, std::size_t ys, float a,
                                                                                 float b, std::size_t pixels,
                                                                                 bool relu) {
    if (relu) {
#pragma omp simd
        for (std::size_t p = 0; p < pixels; ++p) y[p * ys] = std::max(x[p * xs] * a + b, 0.0f);
    } else {
#pragma omp simd
        for (std::size_t p = 0; p < pixels; ++p) y[p * ys] = x[p * xs] * a + b;
    }
}

}  // namespace

shape channel_affine::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (parts.empty() || inputs.size() != parts.size() + 3)
        bad("expected " + std::to_string(parts.size()) + " parts, a, b and an output buffer, got " +
            std::to_string(inputs.size()) + " inputs");
    const std::size_t c = check_pixel_parts(name(), parts, inputs);
    const auto lens0 = inputs[0].lens();
    for (std::size_t i : {parts.size(), parts.size() + 1})
        if (inputs[i].get_type() != type::float32 || inputs[i].elements() != c)
            bad("a and b must hold one float32 value per channel (" + std::to_string(c) + ")");
    shape out(type::float32, {lens0[0], c, lens0[2], lens0[3]});
    check_pixel_result(name(), layout, out, inputs.back());
    return out;
}

argument channel_affine::compute(context&, const shape& out, const std::vector<argument>& args) const {
    const auto& ol = out.lens();
    const std::size_t n = ol[0], c = ol[1], hw = ol[2] * ol[3];
    const pixel_placement yo = place_pixels(layout, c, hw);
    const std::size_t padded = layout.empty() ? c : static_cast<std::size_t>(layout.padded_dims.at(1));
    const auto* a = reinterpret_cast<const float*>(args[parts.size()].data());
    const auto* b = reinterpret_cast<const float*>(args[parts.size() + 1].data());
    auto* y = reinterpret_cast<float*>(args.back().data());
    // Pixel ranges of about 16K values each, a multiple of the threads per image; every
    // range writes all channels of its pixels.
    const std::size_t threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
    std::size_t ranges = std::max<std::size_t>(1, (hw * padded + 16383) / 16384);
    ranges = std::min(hw, (ranges + threads - 1) / threads * threads);
    const std::size_t chunk = (hw + ranges - 1) / ranges;
    const auto tasks = static_cast<std::int64_t>(n * ranges);
#pragma omp parallel for schedule(static) if (n * hw * padded > single_thread_elements && tasks > 1)
    for (std::int64_t t = 0; t < tasks; ++t) {
        const std::size_t img = static_cast<std::size_t>(t) / ranges;
        const std::size_t p0 = static_cast<std::size_t>(t) % ranges * chunk, p1 = std::min(hw, p0 + chunk);
        if (p0 >= p1) continue;
        float* yi = y + img * yo.image + p0 * yo.g;
        std::size_t off = 0;  // the part's first channel in the result
        for (std::size_t k = 0; k < parts.size(); ++k) {
            const std::size_t ck = channels_of(parts[k], args[k].get_shape());
            const pixel_placement xo = place_pixels(parts[k], ck, hw);
            const float* xi = reinterpret_cast<const float*>(args[k].data()) + img * xo.image + p0 * xo.g;
            // Runs of channels that are side by side in both layouts.
            for (std::size_t ch = 0; ch < ck;) {
                const std::size_t oc = off + ch;
                const std::size_t len = std::min({xo.g - ch % xo.g, yo.g - oc % yo.g, ck - ch});
                const float* xs = xi + ch / xo.g * xo.block + ch % xo.g;
                float* ys = yi + oc / yo.g * yo.block + oc % yo.g;
                if (len == 1) affine_channel(xs, xo.g, ys, yo.g, a[oc], b[oc], p1 - p0, relu);
                else affine_rows(xs, xo.g, ys, yo.g, a + oc, b + oc, p1 - p0, len, relu);
                ch += len;
            }
            off += ck;
        }
        // The last block's padding channels (a blocked result whose channels are not a
        // multiple of its block) hold zeros.
        if (padded > c) {
            float* ys = yi + c / yo.g * yo.block + c % yo.g;
            for (std::size_t p = 0; p < p1 - p0; ++p) std::fill_n(ys + p * yo.g, padded - c, 0.0f);
        }
    }
    return args.back().reshape(out);
}

namespace {

struct affine_chain {
    instruction_ref bn;
    std::optional<instruction_ref> concat;  // read by the BN alone
    std::optional<instruction_ref> relu;    // reads the BN, which nothing else reads
    std::vector<instruction_ref> parts;     // the concat's inputs, or the BN's x
};

// The chain whose BN is `bn`, when channel_affine takes it: every part is read in a layout
// the kernel takes, all of which are fixed once the concat (or x) has been lowered.
std::optional<affine_chain> chain_at(const lower_env& env, instruction_ref bn) {
    if (!env.ctx.options().channel_affine || !rewrite::is<op::batch_norm_inference>(bn)) return std::nullopt;
    const auto& in = bn->inputs();
    if (in.size() != 5 || !f32_static(bn) || bn->get_shape().ndim() != 4) return std::nullopt;
    const auto& lens = bn->get_shape().lens();
    for (std::size_t i = 1; i < 5; ++i)
        if (!in[i]->is_literal() || in[i]->get_shape().get_type() != type::float32 ||
            in[i]->get_shape().elements() != lens[1])
            return std::nullopt;
    affine_chain ch{bn, std::nullopt, std::nullopt, {in[0]}};
    if (concat_on_channels(in[0]) && in[0]->outputs().size() == 1) {
        ch.concat = in[0];
        ch.parts = in[0]->inputs();
    }
    if (bn->outputs().size() == 1 && rewrite::is<op::relu_op>(bn->outputs().front()) &&
        f32_static(bn->outputs().front()))
        ch.relu = bn->outputs().front();
    for (auto x : ch.parts) {
        const auto& l = x->get_shape().lens();
        if (!f32_static(x) || l.size() != 4 || l[0] != lens[0] || l[2] != lens[2] || l[3] != lens[3]) return std::nullopt;
        auto it = env.layout.find(&*x);
        if (it == env.layout.end() ? !x->get_shape().standard() : pixel_group_of(it->second) <= 0) return std::nullopt;
    }
    return ch;
}

// The result's layout: the kind of the first part that stores channels per pixel (what
// the convolution after it reads), else plain.
md_record result_layout(const lower_env& env, const affine_chain& ch) {
    for (auto x : ch.parts)
        if (auto it = env.layout.find(&*x); it != env.layout.end() && pixel_group_of(it->second) > 1)
            return pixel_channels_layout(channel_block(it->second), ch.bn->get_shape().lens());
    return {};
}

// Replaces the chain's last instruction `pos` by the kernel and drops the ones before it.
bool lower_chain(lower_env& env, const affine_chain& ch, instruction_ref pos) {
    channel_affine op;
    op.relu = ch.relu.has_value();
    for (auto x : ch.parts) {
        auto it = env.layout.find(&*x);
        op.parts.push_back(it == env.layout.end() ? md_record{} : it->second);
    }
    op.layout = result_layout(env, ch);
    // y = x * a + b, the BN folded in double and rounded once.
    const auto& in = ch.bn->inputs();
    auto values = [&](std::size_t i) { return in[i]->get_literal().to_vector<double>(); };
    const auto st = ch.bn->get_operator().get<op::batch_norm_inference>().scale_shift(values(1), values(2), values(3),
                                                                                      values(4));
    const std::vector<float> a(st.s.begin(), st.s.end()), b(st.t.begin(), st.t.end());
    const shape vec(type::float32, {a.size()});
    auto args = ch.parts;
    args.push_back(env.constant(pos, literal(vec, a)));
    args.push_back(env.constant(pos, literal(vec, b)));
    const shape buffer = op.layout.empty() ? ch.bn->get_shape().as_standard()
                                           : shape(type::uint8, {op.layout.to_md().get_size()});
    args.push_back(env.m.insert_instruction(pos, builtin::allocate{buffer}, {}));
    const bool recorded = !op.layout.empty();
    const md_record layout = op.layout;
    env.m.replace_instruction(pos, op, args);
    if (recorded) env.layout[&*pos] = layout;
    if (ch.bn != pos && ch.bn->outputs().empty()) env.m.remove_instruction(ch.bn);
    if (ch.concat && (*ch.concat)->outputs().empty()) env.m.remove_instruction(*ch.concat);
    return true;
}

}  // namespace

bool concat_waits_for_channel_affine(lower_env& env, instruction_ref concat) {
    if (concat->outputs().size() != 1) return false;
    auto ch = chain_at(env, concat->outputs().front());
    return ch && ch->concat == concat;
}

bool lower_channel_affine_bn(lower_env& env, instruction_ref bn) {
    auto ch = chain_at(env, bn);
    if (!ch) return false;
    if (ch->relu) return true;  // lowered with the relu
    return ch->concat && lower_chain(env, *ch, bn);
}

bool lower_channel_affine_relu(lower_env& env, instruction_ref relu) {
    if (relu->inputs().size() != 1) return false;
    auto ch = chain_at(env, relu->inputs().front());
    return ch && ch->relu == relu && lower_chain(env, *ch, relu);
}

KILN_REGISTER_OP(channel_affine)

}  // namespace kiln::cpu
