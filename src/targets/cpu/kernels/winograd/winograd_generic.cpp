// The Winograd phases for any x86-64 CPU (the compiler's baseline ISA).
#include "targets/cpu/kernels/winograd/winograd_args.hpp"

// 32-byte vectors are passed between inlined helpers of this file only: the ABI note
// about them (a GCC warning) does not concern any call that crosses the file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif


namespace kiln::cpu::wino {
namespace {
#define WG_TARGET
#define WG_AVX2 0
#define WG_AVX512 0
#include "targets/cpu/kernels/winograd/winograd_kernels.inl"
#undef WG_TARGET
#undef WG_AVX2
#undef WG_AVX512
}  // namespace

phases generic_phases() { return {input_phase, gemm_phase, output_phase}; }

}  // namespace kiln::cpu::wino
