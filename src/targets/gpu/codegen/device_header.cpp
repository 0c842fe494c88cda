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
