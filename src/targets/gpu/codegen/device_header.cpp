#include "targets/gpu/codegen/device_header.hpp"

#include "codegen/fast_math.hpp"

#include <regex>

namespace kiln::gpu::codegen {

namespace {

#define KILN_STRINGIFY_IMPL(...) #__VA_ARGS__
#define KILN_STRINGIFY(...) KILN_STRINGIFY_IMPL(__VA_ARGS__)

// NVRTC compiles with -default-device, so these (and the helpers, which carry no execution
// space) are device functions there. Under NVRTC, math functions and memcpy are built in.
const char* header_text = R"kiln(// kiln_device.h: what Kiln's generated kernels use (src/targets/gpu/codegen/device_header.cpp).
#pragma once
#if defined(__CUDACC__)
#define KILN_MATH(ret, name, params, device, host) static __forceinline__ ret name params { return device; }
#else
// Host C++: the kernels as plain functions, one call per (block, thread). The caller runs
// a block's threads as fibers on one OS thread (tests/gpu/host_shim.hpp) and sets the
// index before resuming each; __syncthreads and the warp shuffles call back into it
// (kiln_host_set_sync) so it switches to the other threads until all have arrived.
#define __global__
#define __launch_bounds__(n)
#define __restrict__ __restrict
#define __forceinline__ inline
#define __shared__ static
#define KILN_MATH(ret, name, params, device, host) static inline ret name params { return host; }
struct kiln_dim3 { unsigned x, y, z; };
static kiln_dim3 threadIdx, blockIdx, blockDim, gridDim;
extern "C" __attribute__((visibility("default"))) void kiln_host_set_index(unsigned grid, unsigned block,
                                                                            unsigned b, unsigned t) {
  gridDim = {grid, 1, 1}; blockDim = {block, 1, 1}; blockIdx = {b, 0, 0}; threadIdx = {t, 0, 0};
}
static void kiln_host_no_sync() {}
static void (*kiln_host_block_sync)() = kiln_host_no_sync;
static void (*kiln_host_warp_sync)() = kiln_host_no_sync;
extern "C" __attribute__((visibility("default"))) void kiln_host_set_sync(void (*block)(), void (*warp)()) {
  kiln_host_block_sync = block; kiln_host_warp_sync = warp;
}
static inline void __syncthreads() { kiln_host_block_sync(); }
// A shuffle: every lane posts its value, the warp meets, each reads its partner's, the
// warp meets again (so no lane overwrites a slot before its partner has read it). Values
// pass as double, which holds the float, double and int values kernels shuffle exactly.
static double kiln_host_lanes[1024];
template <class T> static inline T __shfl_xor_sync(unsigned, T v, int m) {
  kiln_host_lanes[threadIdx.x] = (double)v;
  kiln_host_warp_sync();
  const T r = (T)kiln_host_lanes[threadIdx.x ^ (unsigned)m];
  kiln_host_warp_sync();
  return r;
}
// A warp meeting: what each lane wrote to shared memory before it is seen by the others.
static inline void __syncwarp(unsigned = 0xffffffffu) { kiln_host_warp_sync(); }
#endif
// The first out-of-range index a gather kernel met in this module: set, index, axis length
// (emit_move.hpp). gpu_context::finish reads and clears it after the eval.
#if defined(__CUDACC__)
__device__ unsigned long long kiln_error_[3];
static __forceinline__ void kiln_report_index(long long j, long long n) {
  if (atomicCAS(&kiln_error_[0], 0ULL, 1ULL) == 0ULL) { kiln_error_[1] = (unsigned long long)j; kiln_error_[2] = (unsigned long long)n; }
}
#else
static unsigned long long kiln_error_[3];
static inline void kiln_report_index(long long j, long long n) {
  if (!kiln_error_[0]) { kiln_error_[0] = 1; kiln_error_[1] = (unsigned long long)j; kiln_error_[2] = (unsigned long long)n; }
}
extern "C" __attribute__((visibility("default"))) void kiln_host_take_error(unsigned long long* e) {
  for (int k = 0; k < 3; ++k) { e[k] = kiln_error_[k]; kiln_error_[k] = 0; }
}
#endif
// A kernel's arguments, passed by value: the inputs' and the output's device addresses.
#define KILN_MAX_INPUTS 64
struct kiln_args { const void* in[KILN_MAX_INPUTS]; void* out; };

KILN_MATH(float, kiln_expf, (float x), expf(x), __builtin_expf(x))
KILN_MATH(float, kiln_logf, (float x), logf(x), __builtin_logf(x))
KILN_MATH(float, kiln_log1pf, (float x), log1pf(x), __builtin_log1pf(x))
KILN_MATH(float, kiln_sqrtf, (float x), sqrtf(x), __builtin_sqrtf(x))
KILN_MATH(float, kiln_sinf, (float x), sinf(x), __builtin_sinf(x))
KILN_MATH(float, kiln_cosf, (float x), cosf(x), __builtin_cosf(x))
KILN_MATH(float, kiln_tanf, (float x), tanf(x), __builtin_tanf(x))
KILN_MATH(float, kiln_asinf, (float x), asinf(x), __builtin_asinf(x))
KILN_MATH(float, kiln_acosf, (float x), acosf(x), __builtin_acosf(x))
KILN_MATH(float, kiln_atanf, (float x), atanf(x), __builtin_atanf(x))
KILN_MATH(float, kiln_sinhf, (float x), sinhf(x), __builtin_sinhf(x))
KILN_MATH(float, kiln_coshf, (float x), coshf(x), __builtin_coshf(x))
KILN_MATH(float, kiln_tanhf, (float x), tanhf(x), __builtin_tanhf(x))
KILN_MATH(float, kiln_asinhf, (float x), asinhf(x), __builtin_asinhf(x))
KILN_MATH(float, kiln_acoshf, (float x), acoshf(x), __builtin_acoshf(x))
KILN_MATH(float, kiln_atanhf, (float x), atanhf(x), __builtin_atanhf(x))
KILN_MATH(float, kiln_erff, (float x), erff(x), __builtin_erff(x))
KILN_MATH(float, kiln_floorf, (float x), floorf(x), __builtin_floorf(x))
KILN_MATH(float, kiln_ceilf, (float x), ceilf(x), __builtin_ceilf(x))
KILN_MATH(float, kiln_nearbyintf, (float x), rintf(x), __builtin_nearbyintf(x))
KILN_MATH(float, kiln_fabsf, (float x), fabsf(x), __builtin_fabsf(x))
KILN_MATH(float, kiln_fmodf, (float a, float b), fmodf(a, b), __builtin_fmodf(a, b))
KILN_MATH(float, kiln_copysignf, (float a, float b), copysignf(a, b), __builtin_copysignf(a, b))
KILN_MATH(double, kiln_pow, (double a, double b), pow(a, b), __builtin_pow(a, b))
KILN_MATH(double, kiln_sqrt, (double x), sqrt(x), __builtin_sqrt(x))
KILN_MATH(double, kiln_log, (double x), log(x), __builtin_log(x))
KILN_MATH(bool, kiln_isinf, (float x), isinf(x), __builtin_isinf(x))
KILN_MATH(float, kiln_nanf, (const char*), __int_as_float(0x7fffffff), __builtin_nanf(""))
KILN_MATH(float, kiln_inff, (), __int_as_float(0x7f800000), __builtin_inff())
KILN_MATH(double, kiln_nan, (const char*), __longlong_as_double(0x7ff8000000000000LL), __builtin_nan(""))
KILN_MATH(double, kiln_inf, (), __longlong_as_double(0x7ff0000000000000LL), __builtin_inf())
// Reductions across the 32 lanes of a warp by an xor butterfly: every lane ends with the
// same value (each step combines the same two values on both partners).
static __forceinline__ double kiln_warp_sum(double x) {
  for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}
// In float: the attention kernels' running sums (emit_attention.hpp).
static __forceinline__ float kiln_warp_sumf(float x) {
  for (int m = 16; m > 0; m >>= 1) x += __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}
static __forceinline__ double kiln_warp_prod(double x) {
  for (int m = 16; m > 0; m >>= 1) x *= __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}
static __forceinline__ float kiln_warp_max(float x) {
  for (int m = 16; m > 0; m >>= 1) { const float y = __shfl_xor_sync(0xffffffffu, x, m); x = x > y ? x : y; }
  return x;
}
static __forceinline__ float kiln_warp_min(float x) {
  for (int m = 16; m > 0; m >>= 1) { const float y = __shfl_xor_sync(0xffffffffu, x, m); x = x < y ? x : y; }
  return x;
}
static __forceinline__ int kiln_warp_or(int x) {
  for (int m = 16; m > 0; m >>= 1) x |= __shfl_xor_sync(0xffffffffu, x, m);
  return x;
}
KILN_MATH(void*, kiln_memcpy, (void* d, const void* s, unsigned long n), memcpy(d, s, n), __builtin_memcpy(d, s, n))
// 16-bit floats: storage only (no cuda_fp16.h); kernels compute in float and round each
// 16-bit node's value once, as the reference does (src/ops/pointwise.hpp).
struct kiln_half { unsigned short bits; };
struct kiln_bf16 { unsigned short bits; };
// x (any double, so any float exactly) rounded to nearest even into an IEEE format of
// `mb` mantissa and `eb` exponent bits; overflow gives inf, NaN stays NaN (quiet, the top
// payload bits kept), as src/core/float_codec.hpp's encode does for fp16/bf16.
static __forceinline__ unsigned short kiln_encode16(double x, int mb, int eb) {
  unsigned long long u; kiln_memcpy(&u, &x, 8);
  const unsigned sign = (unsigned)(u >> 63) << (mb + eb);
  const unsigned long long a = u & 0x7fffffffffffffffULL;
  const unsigned ones = ((1u << eb) - 1u) << mb;
  if (a > 0x7ff0000000000000ULL) return (unsigned short)(sign | ones | (1u << (mb - 1)) | ((unsigned)(a >> (52 - mb)) & ((1u << mb) - 1u)));
  if (a == 0x7ff0000000000000ULL) return (unsigned short)(sign | ones);
  if (a == 0) return (unsigned short)sign;
  const int bias = (1 << (eb - 1)) - 1;
  const int e = (int)(a >> 52) - 1023;  // double subnormals: far below every 16-bit value
  const unsigned long long m = (a & 0xfffffffffffffULL) | (1ULL << 52);
  const int shift = 52 - mb + (e < 1 - bias ? 1 - bias - e : 0);
  if (shift > 54) return (unsigned short)sign;  // below half the smallest subnormal
  unsigned long long q = m >> shift;
  const unsigned long long rem = m & ((1ULL << shift) - 1), halfway = 1ULL << (shift - 1);
  if (rem > halfway || (rem == halfway && (q & 1))) ++q;
  const int be = e + bias < 1 ? 1 : e + bias;
  const unsigned long long bits = ((unsigned long long)(be - 1) << mb) + q;  // a carry moves into the exponent
  return (unsigned short)(sign | (bits >= ones ? ones : (unsigned)bits));
}
static __forceinline__ float kiln_b2f(kiln_bf16 h) { const unsigned u = (unsigned)h.bits << 16; float f; kiln_memcpy(&f, &u, 4); return f; }
static __forceinline__ kiln_half kiln_d2h(double x) { kiln_half h; h.bits = kiln_encode16(x, 10, 5); return h; }
static __forceinline__ kiln_bf16 kiln_d2b(double x) { kiln_bf16 h; h.bits = kiln_encode16(x, 7, 8); return h; }
#if defined(__CUDACC__)
static __forceinline__ float kiln_h2f(kiln_half h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits)); return f; }
static __forceinline__ kiln_half kiln_f2h(float x) { kiln_half h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(x)); return h; }
#if __CUDA_ARCH__ >= 800
static __forceinline__ kiln_bf16 kiln_f2b(float x) { kiln_bf16 h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(x)); return h; }
#else
static __forceinline__ kiln_bf16 kiln_f2b(float x) { return kiln_d2b(x); }
#endif
#else
// The host build: exact software conversions (the reference's rounding).
static inline float kiln_h2f(kiln_half h) {
  const unsigned s = (unsigned)(h.bits & 0x8000u) << 16, e = (h.bits >> 10) & 0x1fu, m = h.bits & 0x3ffu;
  if (e == 0x1f) { const unsigned u = s | 0x7f800000u | (m << 13); float f; kiln_memcpy(&f, &u, 4); return f; }
  const float v = e == 0 ? (float)m * 0x1p-24f : (float)(m | 0x400u) * __builtin_ldexpf(1.0f, (int)e - 25);
  return s ? -v : v;
}
static inline kiln_half kiln_f2h(float x) { return kiln_d2h(x); }
static inline kiln_bf16 kiln_f2b(float x) { return kiln_d2b(x); }
#endif
// A node's float value rounded to its 16-bit type (and read back, exactly).
static __forceinline__ float kiln_rh(float x) { return kiln_h2f(kiln_f2h(x)); }
static __forceinline__ float kiln_rb(float x) { return kiln_b2f(kiln_f2b(x)); }
static __forceinline__ float kiln_ld(kiln_half h) { return kiln_h2f(h); }
static __forceinline__ float kiln_ld(kiln_bf16 h) { return kiln_b2f(h); }
)kiln";

// Shared text is written for GCC; kiln_device.h defines the kiln_ names.
std::string rename_builtins(const std::string& text) {
    static const std::regex builtin(R"(\b__builtin_([a-z0-9_]+))");
    return std::regex_replace(text, builtin, "kiln_$1");
}

}  // namespace

const std::string& device_header() {
    static const std::string text = header_text;
    return text;
}

std::string device_source(const std::vector<std::string>& kernels) {
    std::string s = "// Generated by Kiln (gpu fused kernels).\n#include \"" + std::string(device_header_name) + "\"\n";
    s += KILN_STRINGIFY(KILN_CODEGEN_HELPERS);
    s += "\n";
    for (const auto& k : kernels) s += k;
    return rename_builtins(s);
}

}  // namespace kiln::gpu::codegen
