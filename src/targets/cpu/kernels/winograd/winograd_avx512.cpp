// The Winograd phases for CPUs with AVX-512 (F, DQ, VL, BW), chosen at run time
// (winograd.cpp): the products run on zmm registers, two 16-column blocks of U at a time;
// the transforms on zmm too where 16 channels lie together. Only these functions carry
// the target attribute.
#include "targets/cpu/kernels/winograd/winograd_args.hpp"

#include <immintrin.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace kiln::cpu::wino {
namespace {
#define WG_TARGET __attribute__((target("avx512f,avx512dq,avx512vl,avx512bw,avx2,fma")))
#define WG_AVX2 1
#define WG_AVX512 1
#include "targets/cpu/kernels/winograd/winograd_kernels.inl"
#undef WG_TARGET
#undef WG_AVX2
#undef WG_AVX512
}  // namespace

phases avx512_phases() { return {input_phase, gemm_phase, output_phase}; }

}  // namespace kiln::cpu::wino
