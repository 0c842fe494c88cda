#include "targets/cpu/kernels/global_avg_pool/global_avg_pool.hpp"

#include "targets/cpu/kernels/silu/silu.hpp"

#include "ops/nn_pooling.hpp"
#include "passes/rewrite_utils.hpp"
#include "targets/cpu/kernels/quant_loops/quant_loops.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace kiln::cpu {

namespace {

constexpr std::size_t chunk = 64;  // channels per task: four 16-lane accumulators
constexpr std::size_t max_level_pixels = std::size_t{1} << 23;  // 255 * 2^23 < 2^31: int32 sums of levels

// y[j] = mean over `pixels` pixels (`stride` floats apart) of x[p][j], j < width <= chunk.
__attribute__((target_clones("avx512f", "avx2", "default"))) void mean_pixels(const float* x, float* y,
                                                                              std::size_t pixels,
                                                                              std::size_t stride,
                                                                              std::size_t width) {
    float acc[chunk] = {};
    if (width == chunk) {
        for (std::size_t p = 0; p < pixels; ++p) {
            const float* xp = x + p * stride;
#pragma omp simd
            for (std::size_t j = 0; j < chunk; ++j) acc[j] += xp[j];
        }
    } else {
        for (std::size_t p = 0; p < pixels; ++p) {
            const float* xp = x + p * stride;
#pragma omp simd
            for (std::size_t j = 0; j < width; ++j) acc[j] += xp[j];
        }
    }
    const float inv = 1.0f / static_cast<float>(pixels);
    for (std::size_t j = 0; j < width; ++j) y[j] = acc[j] * inv;
}

// y[j] = (sum over `pixels` pixels of q[p][j] - pixels zero_point) * scale / pixels, j < width.
template <class Q>
[[gnu::always_inline]] inline void mean_levels_body(const Q* x, float* y, std::size_t pixels, std::size_t stride,
                                                    std::size_t width, float scale, std::int64_t zero_point) {
    std::int32_t acc[chunk] = {};
    for (std::size_t p = 0; p < pixels; ++p) {
        const Q* xp = x + p * stride;
#pragma omp simd
        for (std::size_t j = 0; j < width; ++j) acc[j] += xp[j];
    }
    const auto n = static_cast<double>(pixels), zn = static_cast<double>(zero_point) * n;
    for (std::size_t j = 0; j < width; ++j)
        y[j] = static_cast<float>((static_cast<double>(acc[j]) - zn) * static_cast<double>(scale) / n);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void mean_levels_u8(
    const std::uint8_t* x, float* y, std::size_t pixels, std::size_t stride, std::size_t width, float scale,
    std::int64_t zero_point) {
    mean_levels_body(x, y, pixels, stride, width, scale, zero_point);
}
__attribute__((target_clones("avx512f", "avx2", "default"))) void mean_levels_s8(
    const std::int8_t* x, float* y, std::size_t pixels, std::size_t stride, std::size_t width, float scale,
    std::int64_t zero_point) {
    mean_levels_body(x, y, pixels, stride, width, scale, zero_point);
}

}  // namespace

shape global_avg_pool::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 2) bad("expected x and an output buffer, got " + std::to_string(inputs.size()) + " inputs");
    for (const auto& i : inputs)
        if (!i.is_tensor() || i.dynamic()) bad("inputs must be static tensors, got " + i.to_string());
    const shape& x = inputs[0];
    if (x_type != type::float32) {
        if ((x_type != type::uint8 && x_type != type::int8) || x.get_type() != x_type || x.ndim() != 4 ||
            x.strides() != channels_last_strides(x.lens()) || to_dims(x.lens()) != layout.to_md().dims() ||
            pixel_channels(layout) != static_cast<std::int64_t>(x.lens()[1]) ||
            x.lens()[2] * x.lens()[3] > max_level_pixels)
            bad("x " + x.to_string() + " must be of x_type (uint8 or int8), channels-last, as its layout says, "
                "and of at most 2^23 pixels");
    } else {
        expect_pixel_channels_input(name(), x, layout);
    }
    if (x.lens()[2] * x.lens()[3] == 0) bad("x has no pixels");
    if (dst_layout.dims != std::vector<std::int64_t>{layout.dims[0], layout.dims[1], 1, 1} ||
        dst_layout.padded_dims.at(1) != layout.padded_dims.at(1) || pixel_channels(dst_layout) <= 0)
        bad("the result's layout does not match x's");
    if (inputs[1].bytes() < dst_layout.to_md().get_size()) bad("the output buffer is too small");
    return shape(type::float32, {x.lens()[0], x.lens()[1], 1, 1});
}

argument global_avg_pool::compute(context&, const shape& out, const std::vector<argument>& args) const {
    // The arguments are the buffers: the sizes come from the recorded layout.
    const auto& d = layout.dims;
    const auto n = static_cast<std::size_t>(d.at(0));
    const auto pixels = static_cast<std::size_t>(d.at(2) * d.at(3));
    const auto g = static_cast<std::size_t>(pixel_channels(layout));
    const auto cp = static_cast<std::size_t>(layout.padded_dims.at(1));  // channels with padding
    const std::size_t blocks = cp / g, chunks = (g + chunk - 1) / chunk;
    const auto* x = reinterpret_cast<const float*>(args[0].data());
    auto* y = reinterpret_cast<float*>(args.back().data());
    // x is [n][blocks][pixels][g], y [n][blocks][g] (= [n][cp]).
    const auto tasks = static_cast<std::int64_t>(n * blocks * chunks);
#pragma omp parallel for schedule(static) if (tasks > 1 && pixels * g * n * blocks > 16384)
    for (std::int64_t t = 0; t < tasks; ++t) {
        const std::size_t k = static_cast<std::size_t>(t) % chunks, nb = static_cast<std::size_t>(t) / chunks;
        const std::size_t j0 = k * chunk, width = std::min(chunk, g - j0);
        if (x_type == type::uint8)
            mean_levels_u8(args[0].data_as<std::uint8_t>() + nb * pixels * g + j0, y + nb * g + j0, pixels, g, width,
                           scale, zero_point);
        else if (x_type == type::int8)
            mean_levels_s8(args[0].data_as<std::int8_t>() + nb * pixels * g + j0, y + nb * g + j0, pixels, g, width,
                           scale, zero_point);
        else
            mean_pixels(x + nb * pixels * g + j0, y + nb * g + j0, pixels, g, width);
    }
    return args.back().reshape(out);
}

bool lower_global_avg_pool(lower_env& env, instruction_ref ins) {
    if (!env.ctx.options().global_pool) return false;
    const auto* p = ins->get_operator().any_cast<op::pooling>();
    if (!p || p->mode != op::pooling_mode::average || ins->inputs().size() != 1) return false;
    auto x = ins->inputs()[0];
    if (!f32_static(x) || !f32_static(ins) || x->get_shape().ndim() != 4) return false;
    const auto& xl = x->get_shape().lens();
    const auto& ol = ins->get_shape().lens();
    if (ol != std::vector<std::size_t>{xl[0], xl[1], 1, 1}) return false;
    // The window covers each image exactly: global, or kernel = image without padding.
    const auto g = p->geom(x->get_shape());
    for (std::size_t i = 0; i < 2 && !p->global; ++i)
        if (g.kernel.at(i) != static_cast<std::int64_t>(xl[2 + i]) || g.pad_begin.at(i) != 0 || g.pad_end.at(i) != 0 ||
            g.dilation.at(i) != 1)
            return false;
    auto it = env.layout.find(&*x);
    if (it == env.layout.end() && x->get_shape().strides() == channels_last_strides(xl)) {
        // Channels-last in its IR strides (an int8 convolution's float result, a dequantized
        // one): its [N, C, 1, 1] result is row-major too, no layout to record.
        global_avg_pool op;
        op.layout = pixel_channels_layout(0, xl);
        op.dst_layout = pixel_channels_layout_like(op.layout, {xl[0], xl[1], 1, 1});
        // Levels dequantized by a pass that only this pooling reads: read the levels.
        auto source = x;
        // (Its int32 sums hold up to 2^23 pixels of 8-bit levels.)
        if (const auto* dq = x->get_operator().any_cast<quant_linear_kernel>();
            dq && dq->dequantize && x->outputs().size() == 1 && !rewrite::is_output(env.m, x) &&
            xl[2] * xl[3] <= max_level_pixels &&
            x->inputs()[0]->get_shape().strides() == x->get_shape().strides()) {
            source = x->inputs()[0];
            op.x_type = source->get_shape().get_type();
            op.scale = dq->scale;
            op.zero_point = dq->zero_point;
        }
        auto buf = env.m.insert_instruction(ins, builtin::allocate{ins->get_shape()}, {});
        env.m.replace_instruction(ins, op, {source, buf});
        if (source != x) env.dead.push_back(x);
        return true;
    }
    if (it == env.layout.end() || pixel_channels(it->second) <= 0) return false;
    if (it->second.padded_dims.at(1) % pixel_channels(it->second) != 0) return false;
    global_avg_pool op;
    op.layout = it->second;
    op.dst_layout = pixel_channels_layout_like(op.layout, {xl[0], xl[1], 1, 1});
    // Squeeze-and-excitation after a SiLU: the SiLU's pass sums the channels (silu.hpp).
    if (fuse_silu_means(env, ins, op.dst_layout)) return true;
    auto buf = env.m.insert_instruction(ins, builtin::allocate{shape(type::uint8, {op.dst_layout.to_md().get_size()})}, {});
    env.m.replace_instruction(ins, op, {x, buf});
    env.layout[&*ins] = op.dst_layout;
    return true;
}

KILN_REGISTER_OP(global_avg_pool)

}  // namespace kiln::cpu
