#include "targets/cpu/kernels/fp8/fp8_round_trip.hpp"

#include "ops/quantize.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

#include <omp.h>

#include <cmath>
#include <cstring>

namespace kiln::cpu {

namespace {

#define KILN_FP8_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))

inline std::uint32_t bits_of(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, sizeof(b));
    return b;
}
inline float float_of(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof(f));
    return f;
}

// e4m3fn: 3 mantissa bits, normals from 2^-6, subnormals in steps of 2^-9, largest 448 (the
// next encoding, 480, is NaN: saturation clamps there). Branch-free so that GCC vectorizes it.
[[gnu::always_inline]] inline float e4m3fn(float v) {
    const std::uint32_t b = bits_of(v), sign = b & 0x80000000u, mag = b & 0x7FFFFFFFu;
    const float a = float_of(mag);
    // Normal range: drop 20 mantissa bits, rounding half to even.
    const float normal = float_of((mag + 0x7FFFFu + ((mag >> 20) & 1u)) & 0xFFF00000u);
    // Subnormal range: the nearest multiple of 2^-9 (1.5 * 2^23 rounds half to even).
    const float sub = ((a * 512.0f + 12582912.0f) - 12582912.0f) * (1.0f / 512.0f);
    float r = a < 0.015625f ? sub : normal;
    r = a >= 448.0f ? 448.0f : r;
    r = mag > 0x7F800000u ? a : r;  // NaN stays NaN
    return float_of(bits_of(r) | sign);
}

KILN_FP8_CLONES void round_trip(const float* __restrict x, float* __restrict y, std::size_t n, float scale) {
    for (std::size_t i = 0; i < n; ++i) y[i] = e4m3fn(x[i] / scale) * scale;
}

}  // namespace

float round_to_e4m3fn(float v) { return e4m3fn(v); }

shape fp8_round_trip::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.size() != 2 || inputs[0].get_type() != type::float32 || !inputs[0].standard() ||
        inputs[1].get_type() != type::float32 || inputs[0].lens() != inputs[1].lens() || !inputs[1].standard())
        throw_error(error_code::shape, name() + ": expected a row-major float32 x and an output buffer like it");
    return inputs[1];
}

argument fp8_round_trip::compute(context&, const shape&, const std::vector<argument>& args) const {
    const float* x = args[0].data_as<float>();
    float* y = args[1].data_as<float>();
    const std::size_t n = args[0].get_shape().elements();
    if (n < (std::size_t{1} << 16)) {
        round_trip(x, y, n, scale);
        return args[1];
    }
#pragma omp parallel
    {
        const auto t = static_cast<std::size_t>(omp_get_thread_num());
        const auto threads = static_cast<std::size_t>(omp_get_num_threads());
        const std::size_t per = (n + threads - 1) / threads, first = std::min(n, t * per);
        round_trip(x + first, y + first, std::min(n - first, per), scale);
    }
    return args[1];
}

namespace {

std::optional<float> one_scale(instruction_ref s) {
    if (!s->is_literal() || s->get_shape().elements() != 1 || s->get_shape().get_type() != type::float32)
        return std::nullopt;
    return s->get_literal().to_vector<float>()[0];
}

bool zero_or_none(const instruction& ins) {
    if (ins.inputs().size() < 3) return true;
    auto z = ins.inputs()[2];
    return z->is_literal() && z->get_shape().elements() == 1 && z->get_literal().to_vector<float>()[0] == 0.0f;
}

}  // namespace

bool lower_fp8_round_trip(lower_env& env, instruction_ref ins) {
    const auto* d = ins->get_operator().any_cast<op::dequantize_linear_op>();
    if (!d || ins->get_shape().get_type() != type::float32 || ins->get_shape().dynamic()) return false;
    auto q = ins->inputs()[0];
    const auto* qo = q->get_operator().any_cast<op::quantize_linear_op>();
    if (!qo || q->get_shape().get_type() != type::float8e4m3fn || !qo->saturate || qo->precision) return false;
    const auto s = one_scale(ins->inputs()[1]), qs = one_scale(q->inputs()[1]);
    if (!s || !qs || *s != *qs || !(*s > 0) || !zero_or_none(*ins) || !zero_or_none(*q)) return false;
    auto x = q->inputs()[0];
    if (x->get_shape().get_type() != type::float32 || x->get_shape().dynamic()) return false;
    // A view (attention's transposed heads) is copied into row-major order first.
    x = ensure_layout(env, ins, plain(env, x), shape(type::float32, x->get_shape().lens()));
    if (!x->get_shape().standard()) return false;
    fp8_round_trip k;
    k.scale = *s;
    auto buf = env.m.insert_instruction(ins, builtin::allocate{shape(type::float32, ins->get_shape().lens())}, {});
    env.m.replace_instruction(ins, k, {x, buf});
    return true;
}

KILN_REGISTER_OP(fp8_round_trip)

}  // namespace kiln::cpu
