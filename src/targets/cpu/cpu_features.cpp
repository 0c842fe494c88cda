#include "targets/cpu/cpu_features.hpp"

namespace kiln::cpu {

// __builtin_cpu_supports also checks that the OS enabled the registers (XCR0).
bool has_avx2_fma() {
#if defined(__x86_64__)
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
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
        return has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
    }();
    return yes;
#else
    return false;
#endif
}

}  // namespace kiln::cpu
