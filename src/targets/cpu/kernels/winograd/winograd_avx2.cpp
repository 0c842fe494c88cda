// The Winograd phases for CPUs with AVX2 and FMA, chosen at run time (winograd.cpp):
// only these functions carry the target attribute, so the rest of the build stays at
// the baseline ISA.
#include "targets/cpu/kernels/winograd/winograd_args.hpp"

#include <immintrin.h>

namespace kiln::cpu::wino {
namespace {
#define WG_TARGET __attribute__((target("avx2,fma")))
#define WG_AVX2 1
#define WG_AVX512 0
#include "targets/cpu/kernels/winograd/winograd_kernels.inl"
#undef WG_TARGET
#undef WG_AVX2
#undef WG_AVX512
}  // namespace

phases avx2_phases() { return {input_phase, gemm_phase, output_phase}; }

}  // namespace kiln::cpu::wino
