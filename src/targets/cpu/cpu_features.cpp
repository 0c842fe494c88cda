#include "targets/cpu/cpu_features.hpp"

namespace kiln::cpu {

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

}  // namespace kiln::cpu
