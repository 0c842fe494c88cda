#include "targets/cpu/codegen/isa.hpp"

#include <cstdlib>

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
    __builtin_cpu_init();
    // __builtin_cpu_supports checks that the OS saves the AVX / AVX-512 registers too.
    if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
    if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
    if (__builtin_cpu_supports("x86-64-v2")) return "x86-64-v2";
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

std::string target_isa() {
    if (const char* env = std::getenv("KILN_CPU_ISA"); env && known_isa(env)) return env;
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
