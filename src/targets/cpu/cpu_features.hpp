// What the CPU the program runs on can do, asked of cpuid at run time (never assumed at
// build time: a saved program moves between machines). Kiln's own vector kernels (packed
// GEMM, Winograd, LSTM, SiLU) choose between their AVX-512, AVX2+FMA and portable versions
// by it.
#pragma once
#include <string>

namespace kiln::cpu {

// KILN_CPU_MAX_ISA=avx2 (or generic) makes both answer as on an older CPU (cpu_features.cpp).

// AVX2 and FMA, with the OS saving the AVX registers (false off x86-64).
bool has_avx2_fma();
// AVX-512 F, DQ, VL and BW (with AVX2 and FMA), the OS saving the zmm and mask registers
// (false off x86-64). Every AVX-512 CPU since Skylake-SP has these four; Zen 4 and later too.
bool has_avx512();
// has_avx512 and AVX-512 VNNI (vpdpbusd): the int8 GEMM's VNNI kernel (int8_gemm_vnni.cpp).
bool has_avx512_vnni();
// The same as cpuid alone says it, whatever KILN_CPU_MAX_ISA says (for the options reader,
// which has_avx512 itself reads).
bool cpu_supports_avx512();
// oneDNN runs bfloat16 convolutions natively here (AVX512-BF16 or AMX), as oneDNN itself
// sees the CPU (ONEDNN_MAX_CPU_ISA lowers it); otherwise it would emulate them, slower
// than float32.
bool has_native_bf16();

// The CPU's vendor, family, model and brand string ("AuthenticAMD 25 17 AMD EPYC ..."), as
// cpuid reports them: what tuned choices are keyed by ("unknown" off x86-64).
const std::string& cpu_model();

}  // namespace kiln::cpu
