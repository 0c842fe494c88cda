// The instruction-set level generated kernels are compiled for, detected at run time.
//
// x86-64 uses the psABI levels: "x86-64" (SSE2), "x86-64-v2" (SSE4.2, POPCNT),
// "x86-64-v3" (AVX2, FMA, BMI2: most machines since 2013), "x86-64-v4" (AVX-512 F/BW/CD/
// DQ/VL). A level is a portable -march value, unlike -march=native, which would tie an
// object to this exact CPU model; objects travel in saved programs and cache folders.
// Other architectures use "generic" (the compiler's default for the host).
#pragma once
#include <string>
#include <vector>

namespace kiln::cpu {
struct cpu_options;
}

namespace kiln::cpu::codegen {

// The best level this CPU and OS support (cpuid; never overridden).
const std::string& host_isa();
// The level to generate code for: o.codegen_isa ($KILN_CPU_ISA when set to a known level;
// tests use it to play a machine of another kind), else host_isa().
std::string target_isa(const cpu_options& o);
// Whether code compiled for `tag` runs here (its level is at most the host's).
bool can_run(const std::string& tag);
// Whether `tag` names a level Kiln knows.
bool known_isa(const std::string& tag);
// Compiler flags selecting the level (-march=..., and 512-bit vectors on x86-64-v4).
std::vector<std::string> isa_flags(const std::string& tag);

}  // namespace kiln::cpu::codegen
