#include "targets/cpu/kernels/silu/silu.hpp"

#include "targets/cpu/cpu_features.hpp"
#include "targets/cpu/kernels/vec_exp.hpp"

#include "ops/pointwise_binary.hpp"
#include "ops/pointwise_unary.hpp"
#include "passes/rewrite_utils.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// 32-byte vectors are passed between inlined helpers of this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12's AVX-512 min/max/div intrinsics pass _mm512_undefined_ps() as the unused merge
// source, which its own flow analysis then reports as maybe-uninitialized.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace kiln::cpu {

namespace silu_kernels {
namespace {

// silu(x) = x q with q = sigmoid(x) = e / (2^64 + e), e = 2^64 exp(x) (vec_exp.hpp), x
// clamped to [-130, 20]: above 20, q rounds to 1; below -130 it rounds to 0 (so
// silu(-1e30) is -0, not a tiny garbage product). The factor 2^64 keeps e a normal float
// over that whole range (2^k alone is subnormal below x = -87.3); q itself is subnormal
// below x = -87.3, where x q is near the smallest normal floats: within 1e-5 wherever x q
// is normal. Fourteen vector operations and one division per eight values: 1.7x the
// previous exp(-|x|) formulation with two scale factors.
constexpr int scale_bits = 64;
constexpr float x_min = -130.0f, x_max = 20.0f;
constexpr float two64 = 18446744073709551616.0f;

float silu_scalar(float x) {
    if (x != x) return x;
    const float e = vexp::exp_scaled<scale_bits>(std::min(x_max, std::max(x_min, x)));
    return x * (e / (two64 + e));
}

#define SILU_TARGET __attribute__((target("avx2,fma")))

SILU_TARGET inline __m256 silu8(__m256 x) {
    // min and max return their second operand when either is NaN: a NaN stays NaN.
    const __m256 xc = _mm256_min_ps(_mm256_set1_ps(x_max), _mm256_max_ps(_mm256_set1_ps(x_min), x));
    const __m256 e = vexp::exp_scaled8<scale_bits>(xc);
    const __m256 q = _mm256_div_ps(e, _mm256_add_ps(e, _mm256_set1_ps(two64)));
    return _mm256_mul_ps(x, q);
}

SILU_TARGET void run_avx2(const float* x, float* y, std::size_t n) {
    std::size_t i = 0;
    // Two independent vectors per step: each is a long dependent chain.
    for (; i + 16 <= n; i += 16) {
        const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
        _mm256_storeu_ps(y + i, silu8(a));
        _mm256_storeu_ps(y + i + 8, silu8(b));
    }
    for (; i < n; ++i) y[i] = silu_scalar(x[i]);
}

#define SILU_TARGET512 __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))

SILU_TARGET512 inline __m512 silu16(__m512 x) {
    const __m512 xc = _mm512_min_ps(_mm512_set1_ps(x_max), _mm512_max_ps(_mm512_set1_ps(x_min), x));
    const __m512 e = vexp::exp_scaled16<scale_bits>(xc);
    const __m512 q = _mm512_div_ps(e, _mm512_add_ps(e, _mm512_set1_ps(two64)));
    return _mm512_mul_ps(x, q);
}

SILU_TARGET512 void run_avx512(const float* x, float* y, std::size_t n) {
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
        _mm512_storeu_ps(y + i, silu16(a));
        _mm512_storeu_ps(y + i + 16, silu16(b));
    }
    // The last 1-31 values: masked (a lane outside n is neither read nor written).
    for (; i < n; i += 16) {
        const std::size_t left = n - i < 16 ? n - i : 16;
        const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
        _mm512_mask_storeu_ps(y + i, m, silu16(_mm512_maskz_loadu_ps(m, x + i)));
    }
}

// Rows of `width` values, each column's results added into sums: 64 columns at a time
// (channels-last: a 256-byte stretch of each pixel), down the rows, with the sums in
// four registers; the last vector of a row masked. (Sums kept in memory, a row at a
// time, cost 1.5x the SiLU itself.)
template <int V, bool Masked>
SILU_TARGET512 inline void sum_columns(const float* x, float* y, std::size_t rows, std::size_t width, float* sums,
                                       __mmask16 last) {
    __m512 acc[V];
    for (int v = 0; v < V; ++v)
        acc[v] = Masked && v + 1 == V ? _mm512_maskz_loadu_ps(last, sums + v * 16) : _mm512_loadu_ps(sums + v * 16);
    for (std::size_t r = 0; r < rows; ++r) {
        const float* xr = x + r * width;
        float* yr = y + r * width;
        for (int v = 0; v < V; ++v) {
            if (Masked && v + 1 == V) {
                const __m512 s = silu16(_mm512_maskz_loadu_ps(last, xr + v * 16));
                _mm512_mask_storeu_ps(yr + v * 16, last, s);
                acc[v] = _mm512_add_ps(acc[v], s);
            } else {
                const __m512 s = silu16(_mm512_loadu_ps(xr + v * 16));
                _mm512_storeu_ps(yr + v * 16, s);
                acc[v] = _mm512_add_ps(acc[v], s);
            }
        }
    }
    for (int v = 0; v < V; ++v) {
        if (Masked && v + 1 == V) _mm512_mask_storeu_ps(sums + v * 16, last, acc[v]);
        else _mm512_storeu_ps(sums + v * 16, acc[v]);
    }
}

template <int V>
SILU_TARGET512 inline void sum_columns_any(const float* x, float* y, std::size_t rows, std::size_t width, float* sums,
                                           std::size_t tail) {
    if (tail == 16) sum_columns<V, false>(x, y, rows, width, sums, 0xffff);
    else sum_columns<V, true>(x, y, rows, width, sums, static_cast<__mmask16>((1u << tail) - 1u));
}

SILU_TARGET512 void run_summing_avx512(const float* x, float* y, std::size_t rows, std::size_t width, float* sums) {
    for (std::size_t j = 0; j < width; j += 64) {
        const std::size_t cols = width - j < 64 ? width - j : 64;
        const std::size_t vecs = (cols + 15) / 16, tail = cols - (vecs - 1) * 16;
        switch (vecs) {
        case 1: sum_columns_any<1>(x + j, y + j, rows, width, sums + j, tail); break;
        case 2: sum_columns_any<2>(x + j, y + j, rows, width, sums + j, tail); break;
        case 3: sum_columns_any<3>(x + j, y + j, rows, width, sums + j, tail); break;
        default: sum_columns_any<4>(x + j, y + j, rows, width, sums + j, tail); break;
        }
    }
}

void run_portable(const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = silu_scalar(x[i]);
}

}  // namespace

void run(const float* x, float* y, std::size_t n, kernels k) {
    if (k == kernels::best && has_avx512()) run_avx512(x, y, n);
    else if (k != kernels::portable && has_avx2_fma()) run_avx2(x, y, n);
    else run_portable(x, y, n);
}

void run_summing(const float* x, float* y, std::size_t rows, std::size_t width, float* sums, kernels k) {
    if (k == kernels::best && has_avx512()) return run_summing_avx512(x, y, rows, width, sums);
    // Without AVX-512 (rare among the machines that run SE models): a row at a time.
    for (std::size_t r = 0; r < rows; ++r) {
        run(x + r * width, y + r * width, width, k);
        for (std::size_t j = 0; j < width; ++j) sums[j] += y[r * width + j];
    }
}

}  // namespace silu_kernels

namespace {

std::size_t stored_elements(const silu& op, const shape& x) {
    if (!op.layout.dims.empty()) return op.layout.to_md().get_size() / sizeof(float);
    return x.element_space();
}

}  // namespace

shape silu::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    const bool means = !mean_layout.dims.empty();
    const std::size_t most = means ? 3 : 2;
    if (inputs.empty() || inputs.size() > most)
        bad(std::string("expected x, maybe an output buffer") + (means ? " and the means' buffer" : "") + ", got " +
            std::to_string(inputs.size()) + " inputs");
    const shape& x = inputs[0];
    if (!x.is_tensor() || x.dynamic() || x.get_type() != type::float32)
        bad("x must be a static float32 tensor, got " + x.to_string());
    if (layout.dims.empty() ? !x.packed() : to_dims(x.lens()) != layout.to_md().dims())
        bad("x " + x.to_string() + " is neither packed nor in its recorded layout");
    if (means && inputs.size() < 2) bad("the means' buffer is missing");
    const std::size_t out = inputs.size() - (means ? 2 : 1);
    if (out > 0 && (!inputs[out].is_tensor() || inputs[out].bytes() < stored_elements(*this, x) * sizeof(float)))
        bad("the output buffer " + inputs[out].to_string() + " is smaller than x");
    if (means) {
        const std::int64_t g = pixel_channels(layout);
        if (layout.dims.size() != 4 || g <= 0 || layout.padded_dims.at(1) % g != 0)
            bad("the channel means need x in a layout with channels per pixel");
        if (mean_layout.dims != std::vector<std::int64_t>{layout.dims[0], layout.dims[1], 1, 1} ||
            mean_layout.padded_dims.at(1) != layout.padded_dims.at(1) || pixel_channels(mean_layout) <= 0)
            bad("the means' layout does not match x's");
        if (!inputs.back().is_tensor() || inputs.back().bytes() < mean_layout.to_md().get_size())
            bad("the means' buffer " + inputs.back().to_string() + " is too small");
    }
    return x;
}

namespace {

// SiLU over x ([nb][pixels][g] in memory, g channels per pixel) into y, and the mean of
// each channel over the pixels into means ([nb][g]). Each plane's pixels are cut into
// parts when the planes are fewer than twice the threads (a channels-last activation is
// one plane per image), each part summing into its own row of partial sums.
void silu_with_means(const float* x, float* y, float* means, std::size_t nb, std::size_t pixels, std::size_t g) {
    const auto threads = static_cast<std::size_t>(std::max(1, omp_get_max_threads()));
    // Parts of at least 4096 values: the partial sums and the wake-up pay for themselves.
    std::size_t parts = nb >= 2 * threads ? 1 : (2 * threads + nb - 1) / nb;
    parts = std::clamp<std::size_t>(std::min(parts, pixels * g / 4096), 1, pixels);
    thread_local std::vector<float> partial;
    partial.assign(nb * parts * g, 0.0f);
    float* sums = partial.data();
    const auto items = static_cast<std::int64_t>(nb * parts);
#pragma omp parallel for schedule(static) if (items > 1 && nb * pixels * g > 16384)
    for (std::int64_t it = 0; it < items; ++it) {
        const std::size_t plane = static_cast<std::size_t>(it) / parts, part = static_cast<std::size_t>(it) % parts;
        const std::size_t p0 = part * pixels / parts, p1 = (part + 1) * pixels / parts;
        const std::size_t at = (plane * pixels + p0) * g;
        silu_kernels::run_summing(x + at, y + at, p1 - p0, g, sums + static_cast<std::size_t>(it) * g);
    }
    const float inv = 1.0f / static_cast<float>(pixels);
    for (std::size_t plane = 0; plane < nb; ++plane)
        for (std::size_t j = 0; j < g; ++j) {
            float s = 0.0f;
            for (std::size_t part = 0; part < parts; ++part) s += sums[(plane * parts + part) * g + j];
            means[plane * g + j] = s * inv;
        }
}

}  // namespace

argument silu::compute(context&, const shape& out, const std::vector<argument>& args) const {
    const std::size_t n = stored_elements(*this, args[0].get_shape());
    const auto* x = reinterpret_cast<const float*>(args[0].data());
    if (!mean_layout.dims.empty()) {
        const auto& result = args[args.size() - 2];  // x itself (in place) or the output buffer
        const auto g = static_cast<std::size_t>(pixel_channels(layout));
        const auto& d = layout.dims;
        const auto planes = static_cast<std::size_t>(d[0] * layout.padded_dims[1]) / g;
        silu_with_means(x, reinterpret_cast<float*>(result.data()), reinterpret_cast<float*>(args.back().data()), planes,
                        static_cast<std::size_t>(d[2] * d[3]), g);
        return result.reshape(out);
    }
    auto* y = reinterpret_cast<float*>(args.back().data());
    // Chunks of 16k values (64 KiB): enough work per thread to pay for waking it.
    constexpr std::size_t chunk = 16384;
    const auto chunks = static_cast<std::int64_t>((n + chunk - 1) / chunk);
    if (chunks <= 2) {
        silu_kernels::run(x, y, n);
    } else {
#pragma omp parallel for schedule(static)
        for (std::int64_t c = 0; c < chunks; ++c) {
            const std::size_t b = static_cast<std::size_t>(c) * chunk;
            silu_kernels::run(x + b, y + b, std::min(chunk, n - b));
        }
    }
    return args.back().reshape(out);
}

bool own_silu_enabled(const cpu_options& o) { return o.silu && o.fast_math; }

std::optional<instruction_ref> silu_sigmoid(instruction_ref mul) {
    if (!rewrite::is<op::mul_op>(mul) || mul->inputs().size() != 2) return std::nullopt;
    for (std::size_t k = 0; k < 2; ++k) {
        auto s = mul->inputs()[k], x = mul->inputs()[1 - k];
        if (rewrite::is<op::sigmoid_op>(s) && s->inputs().size() == 1 && s->inputs()[0] == x &&
            s->outputs().size() == 1)
            return s;
    }
    return std::nullopt;
}

bool lower_silu(lower_env& env, instruction_ref mul, instruction_ref sig) {
    auto x = sig->inputs()[0];
    if (!f32_static(x) || !f32_static(mul) || x->get_shape().lens() != mul->get_shape().lens()) return false;
    silu op;
    shape dst = x->get_shape();
    if (auto it = env.layout.find(&*x); it != env.layout.end()) {
        op.layout = it->second;
    } else if (!dst.packed()) {
        return false;
    }
    // In place when x is a kernel's own result (not an input, constant or view of one: the
    // input its result aliases is an allocation; not always its last input, e.g. an
    // in-place cpu::channel_mul's) read by nothing but this SiLU.
    const auto alias = is_cpu_kernel(x) ? x->get_operator().output_alias(to_shapes(x->inputs())) : -1;
    const bool own_result = alias >= 0 && rewrite::is<builtin::allocate>(x->inputs()[static_cast<std::size_t>(alias)]);
    const bool only_user = x->outputs().size() == 2;  // the sigmoid and the product
    if (own_result && only_user) {
        env.m.replace_instruction(mul, op, {x});
    } else {
        const std::size_t bytes = stored_elements(op, dst) * sizeof(float);
        auto buf = env.m.insert_instruction(mul, builtin::allocate{shape(type::uint8, {bytes})}, {});
        env.m.replace_instruction(mul, op, {x, buf});
    }
    if (!op.layout.dims.empty()) env.layout[&*mul] = op.layout;
    if (sig->outputs().empty()) env.m.remove_instruction(sig);
    return true;
}

shape silu_means::compute_shape(const std::vector<shape>& inputs) const {
    auto bad = [&](const std::string& why) { throw_error(error_code::shape, name() + ": " + why); };
    if (inputs.size() != 2) bad("expected the SiLU and the means' buffer, got " + std::to_string(inputs.size()) + " inputs");
    if (layout.dims.size() != 4) bad("the means' layout is not 4-D");
    if (!inputs[1].is_tensor() || inputs[1].bytes() < layout.to_md().get_size())
        bad("the means' buffer " + inputs[1].to_string() + " is too small");
    return shape(type::float32, {static_cast<std::size_t>(layout.dims[0]), static_cast<std::size_t>(layout.dims[1]), 1, 1});
}

argument silu_means::compute(context&, const shape& out, const std::vector<argument>& args) const {
    return args[1].reshape(out);
}

bool fuse_silu_means(lower_env& env, instruction_ref pool, const md_record& dst_layout) {
    if (!env.ctx.options().silu_means || pool->inputs().size() != 1) return false;
    auto x = pool->inputs()[0];
    const auto* s = x->get_operator().any_cast<silu>();
    if (!s || !s->mean_layout.dims.empty() || s->layout.dims.size() != 4) return false;
    const std::int64_t g = pixel_channels(s->layout);
    if (g <= 0 || s->layout.padded_dims.at(1) % g != 0) return false;
    silu op = *s;
    op.mean_layout = dst_layout;
    auto buf = env.m.insert_instruction(x, builtin::allocate{shape(type::uint8, {dst_layout.to_md().get_size()})}, {});
    auto inputs = x->inputs();
    inputs.push_back(buf);
    env.m.replace_instruction(x, op, inputs);
    env.m.replace_instruction(pool, silu_means{dst_layout}, {x, buf});
    env.layout[&*pool] = dst_layout;
    return true;
}

KILN_REGISTER_OP(silu)
KILN_REGISTER_OP(silu_means)

}  // namespace kiln::cpu
