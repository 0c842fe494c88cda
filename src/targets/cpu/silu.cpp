#include "targets/cpu/silu.hpp"

#include "targets/cpu/cpu_features.hpp"

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

// 32-byte vectors are passed between inlined helpers of this file only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kiln::cpu {

namespace silu_kernels {
namespace {

// silu(x) = x / (1 + e) for x >= 0 and x e / (1 + e) for x < 0, with e = exp(-|x|) in
// (0, 1], so nothing overflows. e = 2^k exp(r), -|x| = k ln2 + r with |r| <= ln2/2
// (Cody-Waite, ln2 in two parts), exp(r) a degree-6 minimax polynomial (the generated
// kernels' kiln_fexp coefficients). 2^k is applied as two normal factors, so x e keeps
// its precision down to the smallest normal results (x near -92) instead of going
// through a subnormal e. Below x = -104 the result underflows: -0.
constexpr float log2e = 1.442695022e+00f, ln2_hi = 6.931457520e-01f, ln2_lo = 1.428606765e-06f;
constexpr float p6 = 1.390128513e-03f, p5 = 8.363140747e-03f, p4 = 4.166685417e-02f, p3 = 1.666657776e-01f,
                p2 = 5.000000000e-01f;
constexpr float a_min = -104.0f;

float bits_float(std::int32_t exponent) {
    const auto bits = static_cast<std::uint32_t>(exponent + 127) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

float silu_scalar(float x) {
    if (x != x) return x;
    if (x < a_min) return -0.0f;
    const float a = std::max(a_min, -__builtin_fabsf(x));
    const float k = __builtin_nearbyintf(a * log2e);
    float r = a - k * ln2_hi;
    r = r - k * ln2_lo;
    float p = p6;
    p = p * r + p5;
    p = p * r + p4;
    p = p * r + p3;
    p = p * r + p2;
    p = p * r * r + r + 1.0f;
    const auto ki = static_cast<std::int32_t>(k);
    const float s1 = bits_float(ki >> 1), s2 = bits_float(ki - (ki >> 1));
    const float ps = p * s1;
    // x e as (x p s1) s2: no subnormal intermediate before the (maybe tiny) result.
    const float num = x >= 0.0f ? x : x * ps * s2;
    return num / (1.0f + ps * s2);
}

#define SILU_TARGET __attribute__((target("avx2,fma")))

SILU_TARGET inline __m256 silu8(__m256 x) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    // max returns its second operand when either is NaN: a stays NaN, and so does the
    // result (cvtps gives INT_MIN for NaN; the NaN polynomial carries through).
    const __m256 a = _mm256_max_ps(_mm256_set1_ps(a_min), _mm256_or_ps(x, sign));
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(a, _mm256_set1_ps(log2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(ln2_hi), a);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(ln2_lo), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(p6), r, _mm256_set1_ps(p5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(p4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(p3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(p2));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    const __m256 ps = _mm256_mul_ps(p, s1);
    const __m256 den = _mm256_fmadd_ps(ps, s2, _mm256_set1_ps(1.0f));
    const __m256 neg = _mm256_mul_ps(_mm256_mul_ps(x, ps), s2);
    const __m256 num = _mm256_blendv_ps(x, neg, x);  // the sign bit of x picks x e
    const __m256 y = _mm256_div_ps(num, den);
    // Underflow below a_min (false for NaN: it stays).
    return _mm256_blendv_ps(y, sign, _mm256_cmp_ps(x, _mm256_set1_ps(a_min), _CMP_LT_OQ));
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

void run_portable(const float* x, float* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = silu_scalar(x[i]);
}

}  // namespace

void run(const float* x, float* y, std::size_t n, bool portable) {
    if (!portable && has_avx2_fma()) run_avx2(x, y, n);
    else run_portable(x, y, n);
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
    if (inputs.empty() || inputs.size() > 2)
        bad("expected x and maybe an output buffer, got " + std::to_string(inputs.size()) + " inputs");
    const shape& x = inputs[0];
    if (!x.is_tensor() || x.dynamic() || x.get_type() != type::float32)
        bad("x must be a static float32 tensor, got " + x.to_string());
    if (layout.dims.empty() ? !x.packed() : to_dims(x.lens()) != layout.to_md().dims())
        bad("x " + x.to_string() + " is neither packed nor in its recorded layout");
    if (inputs.size() == 2 && (!inputs[1].is_tensor() || inputs[1].bytes() < stored_elements(*this, x) * sizeof(float)))
        bad("the output buffer " + inputs[1].to_string() + " is smaller than x");
    return x;
}

argument silu::compute(context&, const shape& out, const std::vector<argument>& args) const {
    const std::size_t n = stored_elements(*this, args[0].get_shape());
    const auto* x = reinterpret_cast<const float*>(args[0].data());
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

bool own_silu_enabled(bool fast_math) {
    if (const char* sw = std::getenv("KILN_CPU_SILU"); sw && std::string(sw) == "dnnl") return false;
    return fast_math;
}

std::optional<instruction_ref> silu_sigmoid(instruction_ref mul) {
    if (mul->name() != "mul" || mul->inputs().size() != 2) return std::nullopt;
    for (std::size_t k = 0; k < 2; ++k) {
        auto s = mul->inputs()[k], x = mul->inputs()[1 - k];
        if (s->name() == "sigmoid" && s->inputs().size() == 1 && s->inputs()[0] == x && s->outputs().size() == 1)
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
    // In place when x is a kernel's own result (not an input, constant or view of one)
    // read by nothing but this SiLU.
    const bool own_result = x->name().rfind("cpu::", 0) == 0 &&
                            x->get_operator().output_alias(to_shapes(x->inputs())) >= 0 &&
                            x->inputs().back()->name() == "allocate";
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

KILN_REGISTER_OP(silu)

}  // namespace kiln::cpu
