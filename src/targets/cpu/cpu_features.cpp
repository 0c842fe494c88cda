#include "targets/cpu/cpu_features.hpp"

#include "targets/cpu/cpu_options.hpp"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <cstring>

#include <dnnl.hpp>

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

bool cpu_supports_avx512() {
#if defined(__x86_64__)
    static const bool yes = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx512f") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
               __builtin_cpu_supports("avx512bw");
    }();
    return yes;
#else
    return false;
#endif
}

bool has_avx512() {
    static const bool yes = cap() != isa_cap::avx2 && has_avx2_fma() && cpu_supports_avx512();
    return yes;
}

bool has_avx512_vnni() {
#if defined(__x86_64__)
    static const bool yes = has_avx512() && __builtin_cpu_supports("avx512vnni");
    return yes;
#else
    return false;
#endif
}

bool has_native_bf16() {
    static const bool yes = [] {
        const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
        return (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) & want) == want;
    }();
    return yes;
}

const std::string& cpu_model() {
    static const std::string model = [] {
#if defined(__x86_64__)
        unsigned a = 0, b = 0, c = 0, d = 0;
        if (!__get_cpuid(0, &a, &b, &c, &d)) return std::string("unknown");
        char vendor[13] = {};
        std::memcpy(vendor, &b, 4);
        std::memcpy(vendor + 4, &d, 4);
        std::memcpy(vendor + 8, &c, 4);
        __get_cpuid(1, &a, &b, &c, &d);
        const unsigned base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
        const unsigned family = base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family;
        const unsigned model = base_family == 0x6 || base_family == 0xf ? base_model + (((a >> 16) & 0xf) << 4)
                                                                          : base_model;
        std::string out = std::string(vendor) + " " + std::to_string(family) + " " + std::to_string(model);
        unsigned max_ext = 0;
        __get_cpuid(0x80000000, &max_ext, &b, &c, &d);
        if (max_ext >= 0x80000004) {
            char brand[49] = {};
            for (unsigned i = 0; i < 3; ++i) {
                unsigned r[4] = {};
                __get_cpuid(0x80000002 + i, &r[0], &r[1], &r[2], &r[3]);
                std::memcpy(brand + 16 * i, r, 16);
            }
            std::string s(brand);
            while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
            const auto first = s.find_first_not_of(' ');
            if (first != std::string::npos) out += " " + s.substr(first);
        }
        return out;
#else
        return std::string("unknown");
#endif
    }();
    return model;
}

}  // namespace kiln::cpu
