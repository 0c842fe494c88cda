#include "targets/gpu/gpu_options.hpp"

#include <kiln/errors.hpp>

#include <cstdlib>
#include <regex>

namespace kiln::gpu {

namespace {

const char* env(const char* name) { return std::getenv(name); }

bool off(const char* name) {
    const char* v = env(name);
    return v && std::string(v) == "0";
}

std::string cache_dir() {
    if (const char* d = env("KILN_CACHE_DIR"); d && *d) return d;
    if (const char* x = env("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/kiln";
    if (const char* h = env("HOME"); h && *h) return std::string(h) + "/.cache/kiln";
    return {};
}

// The first of the build's architectures ("90;100" -> "sm_90").
std::string default_arch() {
    std::string archs = KILN_CUDA_ARCHS;
    return "sm_" + archs.substr(0, archs.find_first_of(";, "));
}

}  // namespace

bool valid_arch(const std::string& arch) {
    static const std::regex sm(R"(sm_[0-9]{2,3}[af]?)");
    return std::regex_match(arch, sm);
}

gpu_options read_gpu_options(const compile_options& opts) {
    gpu_options o;
    o.fast_math = opts.fast_math;
    o.arch = default_arch();
    if (const char* a = env("KILN_GPU_ARCH"); a && *a) o.arch = a;
    if (!opts.gpu_arch.empty()) o.arch = opts.gpu_arch;
    if (!valid_arch(o.arch))
        throw_error(error_code::invalid_argument, "gpu: '" + o.arch + "' is not a CUDA architecture (e.g. sm_90)");
    o.fusion = !off("KILN_GPU_FUSION");
    o.cudnn = !off("KILN_GPU_CUDNN");
    o.graphs = !off("KILN_GPU_GRAPHS");
    o.attention = !off("KILN_GPU_ATTENTION");
    o.lstm = !off("KILN_GPU_LSTM");
    if (opts.device_id < 0)
        throw_error(error_code::invalid_argument, "gpu: device_id " + std::to_string(opts.device_id) + " is negative");
    o.device_id = opts.device_id;
    o.offload_copy = opts.offload_copy;
    o.tf32 = opts.tf32;
    o.cache_dir = cache_dir();
    const char* verbose = env("KILN_CODEGEN_VERBOSE");
    o.codegen_verbose = verbose && *verbose && std::string(verbose) != "0";
    return o;
}

}  // namespace kiln::gpu
