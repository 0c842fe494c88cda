#include "targets/cpu/kernels/nchw_to_pixel_channels/nchw_to_pixel_channels.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kiln::cpu {

namespace {

constexpr std::int64_t max_channels = 4;
constexpr std::size_t pixels_per_task = 4096;

// y[p][c] = x[c][p] for pixels [p0, p1) of one image of `hw` pixels; y's pixels are g
// floats apart, channels C..g-1 written as zeros. With g == C the compiler interleaves
// the C streams with vector permutes. Always inlined into the per-ISA clones below
// (target_clones: AVX-512, AVX2, baseline), which compile it for their ISA.
template <int C>
[[gnu::always_inline]] inline void interleave_body(const float* __restrict x, float* __restrict y, std::size_t hw,
                                                   std::size_t g, std::size_t p0, std::size_t p1) {
    if (g == C) {
        for (std::size_t p = p0; p < p1; ++p)
            for (int c = 0; c < C; ++c) y[p * C + c] = x[c * hw + p];
        return;
    }
    for (std::size_t p = p0; p < p1; ++p) {
        float* yp = y + p * g;
        for (int c = 0; c < C; ++c) yp[c] = x[c * hw + p];
        for (std::size_t c = C; c < g; ++c) yp[c] = 0.0f;
    }
}

// One non-template function per channel count: clang (14) refuses target_clones on a
// function template, GCC accepts both forms and makes the same clones.
#define KILN_INTERLEAVE(C)                                                                                        \
    __attribute__((target_clones("avx512f", "avx2", "default"))) void interleave##C(                             \
        const float* __restrict x, float* __restrict y, std::size_t hw, std::size_t g, std::size_t p0,            \
        std::size_t p1) {                                                                                         \
        interleave_body<C>(x, y, hw, g, p0, p1);                                                                  \
    }
KILN_INTERLEAVE(1)
KILN_INTERLEAVE(2)
KILN_INTERLEAVE(3)
KILN_INTERLEAVE(4)
#undef KILN_INTERLEAVE

using interleave_fn = void (*)(const float*, float*, std::size_t, std::size_t, std::size_t, std::size_t);

interleave_fn interleave_for(std::int64_t c) {
    switch (c) {
        case 1: return interleave1;
        case 2: return interleave2;
        case 3: return interleave3;
        case 4: return interleave4;
        default: return nullptr;
    }
}

// The dst layout this op writes: dims [n, c, h, w], one block of g >= c channels per pixel.
bool fits(const md_record& dst) {
    if (dst.dims.size() != 4 || dst.dims[1] < 1 || dst.dims[1] > max_channels) return false;
    const std::int64_t g = pixel_channels(dst);
    return g >= dst.dims[1] && dst.padded_dims.at(1) == g && dst.padded_offsets == std::vector<std::int64_t>(4, 0) &&
           dst.offset0 == 0;
}

}  // namespace

shape nchw_to_pixel_channels::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 2) bad("expected x and an output buffer, got " + std::to_string(inputs.size()) + " inputs");
    for (const auto& i : inputs)
        if (!i.is_tensor() || i.dynamic()) bad("inputs must be static tensors, got " + i.to_string());
    const shape& x = inputs[0];
    if (x.ndim() != 4 || x.get_type() != type::float32 || !x.standard())
        bad("x must be a row-major float32 NCHW tensor, got " + x.to_string());
    if (!fits(dst_layout) || to_dims(x.lens()) != dnnl::memory::dims(dst_layout.dims.begin(), dst_layout.dims.end()))
        bad("the result's layout is not one block of 1-" + std::to_string(max_channels) +
            " channels per pixel with x's dims " + x.to_string());
    if (inputs[1].bytes() < dst_layout.to_md().get_size()) bad("the output buffer is too small");
    return x.as_standard();
}

argument nchw_to_pixel_channels::compute(context&, const shape& out, const std::vector<argument>& args) const {
    const auto& d = dst_layout.dims;
    const auto n = static_cast<std::size_t>(d.at(0)), c = static_cast<std::size_t>(d.at(1));
    const auto hw = static_cast<std::size_t>(d.at(2) * d.at(3));
    const auto g = static_cast<std::size_t>(pixel_channels(dst_layout));
    const auto* x = reinterpret_cast<const float*>(args[0].data());
    auto* y = reinterpret_cast<float*>(args.back().data());
    const interleave_fn f = interleave_for(static_cast<std::int64_t>(c));
    const std::size_t per_image = (hw + pixels_per_task - 1) / pixels_per_task;
    const auto tasks = static_cast<std::int64_t>(n * per_image);
#pragma omp parallel for schedule(static) if (tasks > 1)
    for (std::int64_t t = 0; t < tasks; ++t) {
        const std::size_t i = static_cast<std::size_t>(t) / per_image, k = static_cast<std::size_t>(t) % per_image;
        const std::size_t p0 = k * pixels_per_task, p1 = std::min(hw, p0 + pixels_per_task);
        f(x + i * c * hw, y + i * g * hw, hw, g, p0, p1);
    }
    return args.back().reshape(out);
}

std::optional<instruction_ref> lower_nchw_to_pixel_channels(lower_env& env, instruction_ref pos, instruction_ref x,
                                                            const dnnl::memory::desc& want) {
    if (!env.ctx.options().input_reorder) return std::nullopt;
    if (in_dnnl_layout(env, x) || !f32_static(x)) return std::nullopt;
    const auto& s = x->get_shape();
    if (s.ndim() != 4 || !s.standard() || !md_record::representable(want)) return std::nullopt;
    nchw_to_pixel_channels op;
    op.dst_layout = md_record::from(want);
    if (!fits(op.dst_layout) || to_dims(s.lens()) != want.dims()) return std::nullopt;
    auto buffer = env.m.insert_instruction(pos, builtin::allocate{shape(type::uint8, {want.get_size()})}, {});
    auto r = env.m.insert_instruction(pos, op, {x, buffer});
    env.layout[&*r] = op.dst_layout;
    return r;
}

KILN_REGISTER_OP(nchw_to_pixel_channels)

}  // namespace kiln::cpu
