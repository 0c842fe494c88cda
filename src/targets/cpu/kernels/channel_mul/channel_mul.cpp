#include "targets/cpu/kernels/channel_mul/channel_mul.hpp"

#include "targets/cpu/kernels/silu/silu.hpp"

#include "ops/pointwise_binary.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <cstdlib>
#include <string>

namespace kiln::cpu {

namespace {

// y[p][j] = x[p][j] * s[j] for `pixels` pixels of `g` channels each.
__attribute__((target_clones("avx512f", "avx2", "default"))) void scale_pixels(const float* x, const float* s,
                                                                               float* y, std::size_t pixels,
                                                                               std::size_t g) {
    for (std::size_t p = 0; p < pixels; ++p) {
        const float* xp = x + p * g;
        float* yp = y + p * g;
#pragma omp simd
        for (std::size_t j = 0; j < g; ++j) yp[j] = xp[j] * s[j];
    }
}

// s holds one value per channel of each image (n_s images: 1 broadcasts over all).
bool per_channel(const shape& s, std::size_t n, std::size_t c) {
    const auto& l = s.lens();
    return s.ndim() == 4 && (l[0] == 1 || l[0] == n) && l[1] == c && l[2] == 1 && l[3] == 1 &&
           s.get_type() == type::float32;
}

}  // namespace

shape channel_mul::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != (in_place ? 2u : 3u))
        bad(std::string("expected x, s") + (in_place ? "" : " and an output buffer") + ", got " +
            std::to_string(inputs.size()) + " inputs");
    for (const auto& i : inputs)
        if (!i.is_tensor() || i.dynamic()) bad("inputs must be static tensors, got " + i.to_string());
    const shape& x = inputs[0];
    expect_pixel_channels_input(name(), x, layout);
    // s's IR shape is its logical one (its buffer holds s_stride values per row).
    const shape& s = inputs[1];
    if (!per_channel(s, x.lens()[0], x.lens()[1]) || (s.lens()[0] != 1) != s_per_image ||
        s_stride < static_cast<std::int64_t>(x.lens()[1]))
        bad("s " + s.to_string() + " is not one float32 value per image and channel");
    if (!in_place && inputs[2].bytes() < layout.to_md().get_size()) bad("the output buffer is too small");
    return x;
}

argument channel_mul::compute(context&, const shape& out, const std::vector<argument>& args) const {
    // The arguments are the buffers (a value in a oneDNN layout travels as its bytes): the
    // sizes come from the recorded layout.
    const auto& d = layout.dims;
    const auto n = static_cast<std::size_t>(d.at(0)), c = static_cast<std::size_t>(d.at(1));
    const auto pixels = static_cast<std::size_t>(d.at(2) * d.at(3));
    const auto g = static_cast<std::size_t>(pixel_channels(layout));
    const auto cp = static_cast<std::size_t>(layout.padded_dims.at(1));  // channels with padding
    const std::size_t blocks = cp / g;
    const bool broadcast = !s_per_image;
    const auto* x = reinterpret_cast<const float*>(args[0].data());
    const auto* s = reinterpret_cast<const float*>(args[1].data());
    const argument& result = args[in_place ? 0 : 2];
    auto* y = reinterpret_cast<float*>(result.data());
    // Rows of up to 64 KiB, one (image, channel block, row range) each.
    const std::size_t rows_per = std::max<std::size_t>(1, 16384 / g);
    const std::size_t ranges = (pixels + rows_per - 1) / rows_per;
    const auto tasks = static_cast<std::int64_t>(n * blocks * ranges);
#pragma omp parallel for schedule(static) if (tasks > 2)
    for (std::int64_t t = 0; t < tasks; ++t) {
        const std::size_t r = static_cast<std::size_t>(t) % ranges, nb = static_cast<std::size_t>(t) / ranges;
        const std::size_t img = nb / blocks, b = nb % blocks;
        const std::size_t p0 = r * rows_per, p1 = std::min(pixels, p0 + rows_per);
        const std::size_t base = (nb * pixels + p0) * g;
        // The block's slice of s; lanes past the last channel (padding) scale by zero.
        float sv[64];
        const float* sl = s + (broadcast ? 0 : img) * static_cast<std::size_t>(s_stride) + b * g;
        const std::size_t real = b * g + g <= c ? g : (b * g < c ? c - b * g : 0);
        if (g <= 64 && real < g) {
            for (std::size_t j = 0; j < g; ++j) sv[j] = j < real ? sl[j] : 0.0f;
            sl = sv;
        }
        scale_pixels(x + base, sl, y + base, p1 - p0, g);
    }
    return result.reshape(out);
}

namespace {

// Whether `user` may overwrite x: x's buffer, through the in-place kernels it came from,
// is a kernel's own allocation, and nothing else reads it at any step (a cpu::silu_means,
// which reads only the means buffer beside the SiLU, does not count).
bool may_overwrite(instruction_ref x, instruction_ref user) {
    for (instruction_ref cur = x;;) {
        for (auto u : cur->outputs())
            if (u != user && !u->get_operator().any_cast<silu_means>()) return false;
        if (!is_cpu_kernel(cur)) return false;
        const auto alias = cur->get_operator().output_alias(to_shapes(cur->inputs()));
        if (alias < 0) return false;
        const auto next = cur->inputs()[static_cast<std::size_t>(alias)];
        if (rewrite::is<builtin::allocate>(next)) return true;
        user = cur;
        cur = next;
    }
}

}  // namespace

bool lower_channel_mul(lower_env& env, instruction_ref ins) {
    if (!env.ctx.options().channel_mul) return false;
    if (!rewrite::is<op::mul_op>(ins) || ins->inputs().size() != 2 || !f32_static(ins)) return false;
    for (std::size_t k = 0; k < 2; ++k) {
        auto x = ins->inputs()[k], s = ins->inputs()[1 - k];
        const auto& xl = x->get_shape().lens();
        if (xl != ins->get_shape().lens() || xl.size() != 4 || !f32_static(x)) continue;
        auto it = env.layout.find(&*x);
        if (it == env.layout.end()) continue;
        const std::int64_t g = pixel_channels(it->second);
        // Padded channels only where the block fits the kernel's slice buffer.
        if (g <= 0 || (it->second.padded_dims.at(1) != static_cast<std::int64_t>(xl[1]) && g > 64)) continue;
        if (!per_channel(s->get_shape(), xl[0], xl[1])) continue;
        // s plain and dense, or in a oneDNN layout storing channels per pixel: with 1x1
        // spatial that is [N][C padded], a row of s_stride values per image.
        const auto sl = env.layout.find(&*s);
        const bool s_plain = sl == env.layout.end();
        if (s_plain ? !s->get_shape().packed() : pixel_channels(sl->second) <= 0) continue;
        channel_mul op;
        op.layout = it->second;
        op.s_per_image = s->get_shape().lens()[0] != 1;
        op.s_stride = s_plain ? static_cast<std::int64_t>(xl[1]) : sl->second.padded_dims.at(1);
        op.in_place = may_overwrite(x, ins);
        if (op.in_place) {
            env.m.replace_instruction(ins, op, {x, s});
        } else {
            auto buf =
                env.m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {op.layout.to_md().get_size()})}, {});
            env.m.replace_instruction(ins, op, {x, s, buf});
        }
        env.layout[&*ins] = op.layout;
        return true;
    }
    return false;
}

KILN_REGISTER_OP(channel_mul)

}  // namespace kiln::cpu
