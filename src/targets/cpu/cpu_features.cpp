#include "targets/cpu/cpu_features.hpp"

#include "targets/cpu/cpu_options.hpp"

namespace kiln::cpu {

namespace {

// KILN_CPU_MAX_ISA=avx2 or generic: Kiln's own kernels behave as on a CPU without AVX-512
// (or without AVX2 too), whatever cpuid says; with ONEDNN_MAX_CPU_ISA set alike, a machine
// runs as an older one would (how the AVX2 behaviour is tested on an AVX-512 machine).
// Process-wide: the answers below are asked by kernels that have no context at hand
// (and are cached, as cpuid's answers do not change).
isa_cap cap() { return process_cpu_options().max_isa; }

}  // namespace

// __builtin_cpu_supports also checks that the OS enabled the registers (XCR0).
bool has_avx2_fma() {
#if defined(__x86_64__)
    static const bool yes = [] {
        __builtin_cpu_init();
        return cap() != isa_cap::generic && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }();
    return yes;
#else
    return false;
#endif
}

bool has_avx512() {
#if defined(__x86_64__)
    static const bool yes = [] {
        __builtin_cpu_init();
        return cap() != isa_cap::avx2 && has_avx2_fma() && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw");
    }();
    return yes;
#else
    return false;
#endif
}

}  // namespace kiln::cpu
