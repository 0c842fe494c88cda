#include "targets/cpu/codegen/isa.hpp"

#include "targets/cpu/cpu_options.hpp"


#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace kiln::cpu::codegen {

namespace {

// Levels in increasing order; the index is the level.
const char* const x86_levels[] = {"x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4"};

int level_of(const std::string& tag) {
    for (int i = 0; i < 4; ++i)
        if (tag == x86_levels[i]) return i;
    return -1;
}

std::string detect() {
#if defined(__x86_64__)
    // The psABI's feature lists of each level, the ones GCC's __builtin_cpu_supports("x86-64-vN")
    // checks. The level names themselves are GCC-only (clang 14 refuses them), so the features
    // are tested one by one: with __builtin_cpu_supports where both compilers know the name
    // (it also checks that the OS saves the AVX / AVX-512 registers), with cpuid for the few
    // that only GCC names (cmpxchg16b, lahf, lzcnt, movbe, f16c, osxsave). Same levels as
    // before on GCC: the generated code asks for -march=x86-64-vN of the level found here.
    __builtin_cpu_init();
    unsigned a = 0, b = 0, c1 = 0, d = 0, c81 = 0;
    if (!__get_cpuid(1, &a, &b, &c1, &d)) c1 = 0;
    if (!__get_cpuid(0x80000001u, &a, &b, &c81, &d)) c81 = 0;
    const bool v2 = (c1 & bit_CMPXCHG16B) && (c81 & bit_LAHF_LM) && __builtin_cpu_supports("popcnt") &&
                    __builtin_cpu_supports("sse3") && __builtin_cpu_supports("ssse3") &&
                    __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("sse4.2");
    const bool v3 = v2 && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("fma") &&
                    (c1 & bit_F16C) && (c1 & bit_MOVBE) && (c1 & bit_OSXSAVE) && (c81 & bit_ABM);  // ABM: LZCNT
    const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512vl");
    if (v4) return "x86-64-v4";
    if (v3) return "x86-64-v3";
    if (v2) return "x86-64-v2";
    return "x86-64";
#else
    return "generic";
#endif
}

}  // namespace

const std::string& host_isa() {
    static const std::string tag = detect();
    return tag;
}

bool known_isa(const std::string& tag) {
#if defined(__x86_64__)
    return level_of(tag) >= 0;
#else
    return tag == "generic";
#endif
}

std::string target_isa(const cpu_options& o) {
    if (!o.codegen_isa.empty()) return o.codegen_isa;  // known: read_cpu_options drops others
    return host_isa();
}

bool can_run(const std::string& tag) {
#if defined(__x86_64__)
    const int l = level_of(tag);
    return l >= 0 && l <= level_of(host_isa());
#else
    return tag == host_isa();
#endif
}

std::vector<std::string> isa_flags(const std::string& tag) {
    if (level_of(tag) < 0) return {};
    std::vector<std::string> f{"-march=" + tag, "-mtune=generic"};
    // GCC's generic tuning keeps AVX-512 code at 256-bit vectors; memory-bound loops gain
    // from the full width.
    if (tag == "x86-64-v4") f.push_back("-mprefer-vector-width=512");
    return f;
}

}  // namespace kiln::cpu::codegen
