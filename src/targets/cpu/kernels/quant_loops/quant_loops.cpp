// Kiln's own loops for quantized elementwise work (quant_loops.hpp).
#include "targets/cpu/kernels/quant_loops/quant_loops.hpp"
#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/quant_loops/quant_add_avx512.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::cpu {

namespace {

bool is_8bit(type t) { return t == type::int8 || t == type::uint8; }

// Kiln's own elementwise loops: compiled for AVX-512, AVX2 and the baseline, picked by cpuid.
// __restrict and the conversion through int let GCC vectorize them (8-bit pointers may alias
// anything otherwise); x86-64-v4 (AVX-512 F, BW, ...) for the byte narrowing.
#define KILN_QUANT_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))

constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: v + magic - magic rounds half to even

// f(first, count) over [0, n): on the calling thread for small n, else one chunk per thread.
template <class F>
void in_chunks(std::size_t n, F f) {
    if (n < (std::size_t{1} << 16)) return f(0, n);
#pragma omp parallel
    {
        const auto t = static_cast<std::size_t>(omp_get_thread_num());
        const auto threads = static_cast<std::size_t>(omp_get_num_threads());
        const std::size_t per = (n + threads - 1) / threads, first = std::min(n, t * per);
        f(first, std::min(n - first, per));
    }
}

}  // namespace

shape quant_linear_kernel::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() != 2) throw_error(error_code::shape, name() + ": expected x and the output buffer");
    const auto& x = inputs[0];
    const auto& out = inputs[1];
    if (channels_last) {
        const auto& l = x.lens();
        const bool fits = !dequantize && x.get_type() == type::float32 && out.get_type() == out_type &&
                          is_8bit(out_type) && x.ndim() == 4 && x.standard() && out.lens() == l && l[1] >= 1 &&
                          l[1] <= max_interleaved_channels &&
                          out.strides() == channels_last_strides(l);
        if (!fits)
            throw_error(error_code::shape, name() + ": cannot quantize " + x.to_string() + " into channels-last " +
                                               out.to_string() + " (x: row-major NCHW float32 of 1-" +
                                               std::to_string(max_interleaved_channels) + " channels)");
        return out;
    }
    const bool types_fit = dequantize ? is_8bit(x.get_type()) && out.get_type() == type::float32
                                      : x.get_type() == type::float32 && out.get_type() == out_type && is_8bit(out_type);
    if (!types_fit || !x.packed() || x.lens() != out.lens() || x.strides() != out.strides())
        throw_error(error_code::shape, name() + ": cannot " + (dequantize ? "dequantize " : "quantize ") +
                                           x.to_string() + " into " + out.to_string());
    return out;
}

namespace {

template <class Q>
[[gnu::always_inline]] inline void quantize_values(const float* __restrict x, Q* __restrict y, std::size_t n, float scale,
                                                   float zp) {
    const float lo = std::is_signed_v<Q> ? -128.0f : 0.0f, hi = std::is_signed_v<Q> ? 127.0f : 255.0f;
    for (std::size_t i = 0; i < n; ++i) {
        const float q = (x[i] / scale + round_magic) - round_magic + zp;
        y[i] = static_cast<Q>(static_cast<int>(std::min(std::max(q, lo), hi)));
    }
}

template <class Q>
[[gnu::always_inline]] inline void dequantize_values(const Q* __restrict x, float* __restrict y, std::size_t n,
                                                     float scale, float zp) {
    for (std::size_t i = 0; i < n; ++i) y[i] = (static_cast<float>(x[i]) - zp) * scale;
}

KILN_QUANT_CLONES void quantize_u8(const float* x, std::uint8_t* y, std::size_t n, float s, float zp) {
    quantize_values(x, y, n, s, zp);
}
KILN_QUANT_CLONES void quantize_s8(const float* x, std::int8_t* y, std::size_t n, float s, float zp) {
    quantize_values(x, y, n, s, zp);
}
KILN_QUANT_CLONES void dequantize_u8(const std::uint8_t* x, float* y, std::size_t n, float s, float zp) {
    dequantize_values(x, y, n, s, zp);
}
KILN_QUANT_CLONES void dequantize_s8(const std::int8_t* x, float* y, std::size_t n, float s, float zp) {
    dequantize_values(x, y, n, s, zp);
}

// y[p][c] = Q(x[c][p]) for pixels [p0, p1) of one image of hw pixels, C channels: the
// compiler quantizes the C streams and interleaves their bytes with vector permutes.
template <int C, class Q>
[[gnu::always_inline]] inline void quantize_interleave_body(const float* __restrict x, Q* __restrict y, std::size_t hw,
                                                            std::size_t p0, std::size_t p1, float scale, float zp) {
    const float lo = std::is_signed_v<Q> ? -128.0f : 0.0f, hi = std::is_signed_v<Q> ? 127.0f : 255.0f;
    for (std::size_t p = p0; p < p1; ++p)
        for (int c = 0; c < C; ++c) {
            const float q = (x[c * hw + p] / scale + round_magic) - round_magic + zp;
            y[p * C + c] = static_cast<Q>(static_cast<int>(std::min(std::max(q, lo), hi)));
        }
}

// One non-template function per channel count and type (clang refuses target_clones on
// templates; nchw_to_pixel_channels.cpp does the same).
#define KILN_QUANTIZE_INTERLEAVE(C, Q, suffix)                                                                   \
    KILN_QUANT_CLONES void quantize_interleave##C##suffix(const float* x, Q* y, std::size_t hw, std::size_t p0, \
                                                          std::size_t p1, float s, float zp) {                 \
        quantize_interleave_body<C>(x, y, hw, p0, p1, s, zp);                                                  \
    }
KILN_QUANTIZE_INTERLEAVE(1, std::uint8_t, _u8)
KILN_QUANTIZE_INTERLEAVE(2, std::uint8_t, _u8)
KILN_QUANTIZE_INTERLEAVE(3, std::uint8_t, _u8)
KILN_QUANTIZE_INTERLEAVE(4, std::uint8_t, _u8)
KILN_QUANTIZE_INTERLEAVE(1, std::int8_t, _s8)
KILN_QUANTIZE_INTERLEAVE(2, std::int8_t, _s8)
KILN_QUANTIZE_INTERLEAVE(3, std::int8_t, _s8)
KILN_QUANTIZE_INTERLEAVE(4, std::int8_t, _s8)
#undef KILN_QUANTIZE_INTERLEAVE

template <class Q>
using interleave_fn = void (*)(const float*, Q*, std::size_t, std::size_t, std::size_t, float, float);

interleave_fn<std::uint8_t> interleave_for(std::size_t c, std::uint8_t*) {
    constexpr interleave_fn<std::uint8_t> fns[] = {quantize_interleave1_u8, quantize_interleave2_u8,
                                                   quantize_interleave3_u8, quantize_interleave4_u8};
    return fns[c - 1];
}
interleave_fn<std::int8_t> interleave_for(std::size_t c, std::int8_t*) {
    constexpr interleave_fn<std::int8_t> fns[] = {quantize_interleave1_s8, quantize_interleave2_s8,
                                                  quantize_interleave3_s8, quantize_interleave4_s8};
    return fns[c - 1];
}

// x [n][c][hw] float32 into y [n][hw][c], images split into tasks of a few thousand pixels.
template <class Q>
void quantize_channels_last(const float* x, Q* y, const std::vector<std::size_t>& lens, float s, float zp) {
    constexpr std::size_t pixels_per_task = 4096;
    const std::size_t n = lens[0], c = lens[1], hw = lens[2] * lens[3];
    const auto f = interleave_for(c, y);
    const std::size_t per_image = (hw + pixels_per_task - 1) / pixels_per_task;
    const auto tasks = static_cast<std::int64_t>(n * per_image);
#pragma omp parallel for schedule(static) if (n * c * hw >= (std::size_t{1} << 16))
    for (std::int64_t t = 0; t < tasks; ++t) {
        const std::size_t i = static_cast<std::size_t>(t) / per_image, k = static_cast<std::size_t>(t) % per_image;
        const std::size_t p0 = k * pixels_per_task, p1 = std::min(hw, p0 + pixels_per_task);
        f(x + i * c * hw, y + i * c * hw, hw, p0, p1, s, zp);
    }
}

}  // namespace

argument quant_linear_kernel::compute(context&, const shape&, const std::vector<argument>& args) const {
    // Packed tensors: element i of the buffer, whatever the order of the dims.
    const std::size_t n = args[1].get_shape().elements();
    const float zp = static_cast<float>(zero_point);
    const type qt = dequantize ? args[0].get_shape().get_type() : out_type;
    const float s = scale;
    if (channels_last && qt == type::uint8) {
        quantize_channels_last(args[0].data_as<float>(), args[1].data_as<std::uint8_t>(), args[0].get_shape().lens(),
                               s, zp);
    } else if (channels_last) {
        quantize_channels_last(args[0].data_as<float>(), args[1].data_as<std::int8_t>(), args[0].get_shape().lens(),
                               s, zp);
    } else if (dequantize && qt == type::uint8) {
        const auto* x = args[0].data_as<std::uint8_t>();
        auto* y = args[1].data_as<float>();
        in_chunks(n, [&](std::size_t i, std::size_t m) { dequantize_u8(x + i, y + i, m, s, zp); });
    } else if (dequantize) {
        const auto* x = args[0].data_as<std::int8_t>();
        auto* y = args[1].data_as<float>();
        in_chunks(n, [&](std::size_t i, std::size_t m) { dequantize_s8(x + i, y + i, m, s, zp); });
    } else if (qt == type::uint8) {
        const auto* x = args[0].data_as<float>();
        auto* y = args[1].data_as<std::uint8_t>();
        in_chunks(n, [&](std::size_t i, std::size_t m) { quantize_u8(x + i, y + i, m, s, zp); });
    } else {
        const auto* x = args[0].data_as<float>();
        auto* y = args[1].data_as<std::int8_t>();
        in_chunks(n, [&](std::size_t i, std::size_t m) { quantize_s8(x + i, y + i, m, s, zp); });
    }
    return args[1];
}

shape quant_add_kernel::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() != 3) throw_error(error_code::shape, name() + ": expected a, b and the output buffer");
    const shape want = op.compute_shape({inputs[0], inputs[1]});
    const auto& out = inputs[2];
    for (const auto& s : inputs)
        if (!s.packed() || s.strides() != out.strides())
            throw_error(error_code::shape, name() + ": a, b and the result must share one packed layout, got " +
                                               s.to_string() + " and " + out.to_string());
    if (!want.same_lens_and_type(out))
        throw_error(error_code::shape, name() + ": result " + want.to_string() + " does not fit " + out.to_string());
    return out;
}

namespace {

template <class T>
[[gnu::always_inline]] inline void add_values(const op::quant_add& p, const T* __restrict a, const T* __restrict b,
                                              T* __restrict y, std::size_t n) {
    const float za = static_cast<float>(p.a_zero_point), zb = static_cast<float>(p.b_zero_point);
    const float zy = static_cast<float>(p.y_zero_point);
    const float lo = std::is_signed_v<T> ? -128.0f : 0.0f, hi = std::is_signed_v<T> ? 127.0f : 255.0f;
    for (std::size_t i = 0; i < n; ++i) {
        const float x = (static_cast<float>(a[i]) - za) * p.a_scale + (static_cast<float>(b[i]) - zb) * p.b_scale;
        const float q = (x / p.y_scale + round_magic) - round_magic + zy;
        y[i] = static_cast<T>(static_cast<int>(std::min(std::max(q, lo), hi)));
    }
}

KILN_QUANT_CLONES void add_u8(const op::quant_add& p, const std::uint8_t* a, const std::uint8_t* b, std::uint8_t* y,
                              std::size_t n) {
    add_values(p, a, b, y, n);
}
KILN_QUANT_CLONES void add_s8(const op::quant_add& p, const std::int8_t* a, const std::int8_t* b, std::int8_t* y,
                              std::size_t n) {
    add_values(p, a, b, y, n);
}

}  // namespace

argument quant_add_kernel::compute(context&, const shape&, const std::vector<argument>& args) const {
    const std::size_t n = args[2].get_shape().elements();
    const auto ta = args[0].get_shape().get_type(), tb = args[1].get_shape().get_type();
    const auto ty = args[2].get_shape().get_type();
    const bool avx512 = has_avx512();
    if (ta == type::uint8 && tb == type::uint8 && ty == type::uint8) {
        const auto *a = args[0].data_as<std::uint8_t>(), *b = args[1].data_as<std::uint8_t>();
        auto* y = args[2].data_as<std::uint8_t>();
        in_chunks(n, [&](std::size_t i, std::size_t m) {
            if (avx512) quant_add_avx512(op, a + i, b + i, y + i, m);
            else add_u8(op, a + i, b + i, y + i, m);
        });
    } else if (ta == type::int8 && tb == type::int8 && ty == type::int8) {
        const auto *a = args[0].data_as<std::int8_t>(), *b = args[1].data_as<std::int8_t>();
        auto* y = args[2].data_as<std::int8_t>();
        in_chunks(n, [&](std::size_t i, std::size_t m) {
            if (avx512) quant_add_avx512(op, a + i, b + i, y + i, m);
            else add_s8(op, a + i, b + i, y + i, m);
        });
    } else throw_error(error_code::unsupported, name() + ": takes uint8 or int8 operands and result of one type");
    return args[2];
}

KILN_REGISTER_OP(quant_add_kernel)
KILN_REGISTER_OP(quant_linear_kernel)

}  // namespace kiln::cpu
