#include "targets/cpu/cpu_options.hpp"

#include "targets/cpu/codegen/isa.hpp"
#include "targets/cpu/cpu_features.hpp"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace kiln::cpu {

namespace {

// The cpu target's one reader of the environment (a unit test holds it to that).
const char* env(const char* name) { return std::getenv(name); }

std::string env_string(const char* name) {
    const char* v = env(name);
    return v ? v : "";
}

// A switch that only `off_value` turns off (any other value, or none, keeps it on).
bool on_unless(const char* name, const char* off_value) {
    const char* v = env(name);
    return !(v && std::string(v) == off_value);
}

isa_cap cap_of(const char* name) {
    const std::string v = env_string(name);
    if (v == "avx2") return isa_cap::avx2;
    if (v == "generic") return isa_cap::generic;
    return isa_cap::none;
}

std::size_t thread_count(std::size_t requested) {
    if (requested > 0) return requested;
    if (const char* v = env("KILN_NUM_THREADS")) {
        char* end = nullptr;
        auto n = std::strtoul(v, &end, 10);
        if (end != v && *end == '\0' && n > 0) return n;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return static_cast<std::size_t>(CPU_COUNT(&set));
    return std::max(1u, std::thread::hardware_concurrency());
}

std::string cache_dir() {
    if (const char* d = env("KILN_CACHE_DIR"); d && *d) return d;
    if (const char* x = env("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
    if (const char* h = env("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
    return {};
}

}  // namespace

cpu_options read_cpu_options(const compile_options& opts) {
    cpu_options o;
    o.threads = thread_count(opts.threads);
    o.fast_math = opts.fast_math;
    o.exhaustive_tune = opts.exhaustive_tune;
    o.tuning_cache = env_string("KILN_TUNING_CACHE");

    // Image by image pays where it was measured to (AVX-512: Zen 5, ResNet-50 batch 8) and
    // costs ~10% on an AVX2-only Zen 3 (309 vs 345 ms, 5 quiet rounds): automatic = AVX-512.
    o.dnnl = on_unless("KILN_CPU_DNNL", "0");
    o.fusion = on_unless("KILN_CPU_FUSION", "0");
    o.dw_fusion = on_unless("KILN_CPU_DW_FUSION", "0");
    o.bf16 = on_unless("KILN_CPU_BF16", "0");
    o.bf16_activations = on_unless("KILN_CPU_BF16_ACTIVATIONS", "0");
    const auto int8 = env_string("KILN_CPU_INT8_KERNELS");
    if (int8 == "all") o.int8_kernels = int8_kernel_choice::onednn_everywhere;
    else if (int8 == "float") o.int8_kernels = int8_kernel_choice::float_ops;
    else if (int8 == "onednn") o.int8_kernels = int8_kernel_choice::onednn_vnni;
    else if (int8 == "own") o.int8_kernels = int8_kernel_choice::own_vnni;
    o.dw_blocked = on_unless("KILN_CPU_DW_BLOCKED", "0");
    o.sum_post_op = on_unless("KILN_CPU_SUM_POST_OP", "0");
    o.attention = on_unless("KILN_CPU_ATTENTION", "0");
    o.channel_mul = on_unless("KILN_CPU_CHANNEL_MUL", "dnnl");
    o.channel_affine = on_unless("KILN_CPU_CHANNEL_AFFINE", "dnnl");
    o.channel_gather = on_unless("KILN_CPU_CHANNEL_GATHER", "0");
    o.global_pool = on_unless("KILN_CPU_GLOBAL_POOL", "dnnl");
    o.input_reorder = on_unless("KILN_CPU_INPUT_REORDER", "dnnl");
    o.silu = on_unless("KILN_CPU_SILU", "dnnl");
    o.silu_means = on_unless("KILN_CPU_SILU_MEANS", "0");
    const std::string team = env_string("KILN_CPU_TEAM");
    if (team == "0") o.team = team_choice::off;
    else if (team == "1") o.team = team_choice::on;
    const std::string team_parts = env_string("KILN_CPU_TEAM_PARTS");
    if (team_parts == "team") o.team_parts = team_parts_choice::team;
    else if (team_parts == "caller") o.team_parts = team_parts_choice::caller;
    else if (team_parts == "worker") o.team_parts = team_parts_choice::worker;

    const std::string max_pool = env_string("KILN_CPU_MAX_POOL");
    if (max_pool == "dnnl") o.max_pool = max_pool_choice::dnnl;
    else if (max_pool == "all") o.max_pool = max_pool_choice::all;

    const std::string packed = env_string("KILN_CPU_PACKED_GEMM");
    if (packed == "0") o.packed_gemm = packed_gemm_choice::off;
    else if (packed == "all") o.packed_gemm = packed_gemm_choice::all;
    o.packed_gemm_isa = cap_of("KILN_CPU_PACKED_GEMM_ISA");
    o.packed_gemm_copy_a = on_unless("KILN_CPU_PACKED_GEMM_COPY_A", "0");

    const std::string conv_gemm = env_string("KILN_CPU_CONV_GEMM");
    if (conv_gemm == "0") o.conv_gemm = conv_gemm_choice::off;
    else if (conv_gemm == "1x1") o.conv_gemm = conv_gemm_choice::pointwise;
    else if (conv_gemm == "all") o.conv_gemm = conv_gemm_choice::all;
    else if (conv_gemm == "tall") o.conv_gemm = conv_gemm_choice::tall;
    o.conv_gemm_strided = on_unless("KILN_CPU_CONV_GEMM_STRIDED", "0");
    o.conv_gemm_tiny = on_unless("KILN_CPU_CONV_GEMM_TINY", "0");

    const std::string winograd = env_string("KILN_CPU_WINOGRAD");
    if (winograd == "0") o.winograd = winograd_choice::off;
    else if (winograd == "2") o.winograd = winograd_choice::f2;
    else if (winograd == "4") o.winograd = winograd_choice::f4;
    else if (winograd == "all") o.winograd = winograd_choice::all;
    o.winograd_isa = cap_of("KILN_CPU_WINOGRAD_ISA");

    const std::string lstm = env_string("KILN_CPU_LSTM");
    if (lstm == "portable") o.lstm = lstm_choice::portable;
    else if (lstm == "dnnl") o.lstm = lstm_choice::dnnl;

    o.max_isa = cap_of("KILN_CPU_MAX_ISA");
    // Image by image pays where it was measured to (AVX-512: Zen 5, ResNet-50 batch 8) and
    // costs ~10% on an AVX2-only Zen 3 (309 vs 345 ms, 5 quiet rounds): automatic = AVX-512
    // (has_avx512's answer, from cpuid and the max_isa just read: has_avx512 reads these
    // options itself).
    const std::string split = env_string("KILN_CPU_SPLIT_BATCH");
    const bool avx512 = cpu_supports_avx512() && o.max_isa != isa_cap::avx2 && o.max_isa != isa_cap::generic;
    o.split_batch = split == "0" ? false : split == "1" ? true : avx512;

    if (const std::string isa = env_string("KILN_CPU_ISA"); codegen::known_isa(isa)) o.codegen_isa = isa;
    o.cxx = env_string("KILN_CXX");
    if (const char* path = env("PATH")) o.search_path = path;
    o.cache_dir = cache_dir();
    const std::string verbose = env_string("KILN_CODEGEN_VERBOSE");
    o.codegen_verbose = !verbose.empty() && verbose != "0";
    return o;
}

const cpu_options& process_cpu_options() {
    static const cpu_options o = read_cpu_options(compile_options{});
    return o;
}

}  // namespace kiln::cpu
