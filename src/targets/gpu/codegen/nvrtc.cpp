#include "targets/gpu/codegen/nvrtc.hpp"

#include "codegen/hash.hpp"
#include "targets/gpu/codegen/device_header.hpp"

#include <kiln/errors.hpp>

#include <nvrtc.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <sstream>

namespace kiln::gpu::codegen {

namespace fs = std::filesystem;
using kiln::codegen::content_hash;

namespace {

void check(nvrtcResult r, const char* what) {
    if (r != NVRTC_SUCCESS) throw_error(error_code::runtime, std::string("NVRTC: ") + what + ": " + nvrtcGetErrorString(r));
}

std::string read_file(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    if (!f) return {};
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

bool write_file(const fs::path& p, const std::string& bytes) {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    const fs::path tmp = p.string() + ".tmp" + std::to_string(rng());
    {
        std::ofstream f(tmp, std::ios::binary);
        if (!f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()))) return false;
    }
    std::error_code ec;
    fs::rename(tmp, p, ec);
    if (ec) fs::remove(tmp, ec);
    return !ec;
}

std::string sum_of(const std::string& cubin, const std::string& ptx, const std::string& log) {
    return std::to_string(cubin.size()) + " " + content_hash(cubin) + " " + std::to_string(ptx.size()) + " " +
           content_hash(ptx) + " " + std::to_string(log.size()) + " " + content_hash(log) + "\n";
}

bool from_cache(const fs::path& base, nvrtc_result& r) {
    const auto sum = read_file(base.string() + ".sum");
    if (sum.empty()) return false;
    r.cubin = read_file(base.string() + ".cubin");
    r.ptx = read_file(base.string() + ".ptx");
    r.log = read_file(base.string() + ".ptxas");
    if (r.cubin.empty() || sum != sum_of(r.cubin, r.ptx, r.log)) {
        ++stats().cache_rejects;
        std::error_code ec;
        for (const char* ext : {".sum", ".cubin", ".ptx", ".ptxas"}) fs::remove(base.string() + ext, ec);
        return false;
    }
    return true;
}

void to_cache(const fs::path& base, const nvrtc_result& r) {
    std::error_code ec;
    fs::create_directories(base.parent_path(), ec);
    // The sum goes last: an entry without it is never read.
    if (write_file(base.string() + ".cubin", r.cubin) && write_file(base.string() + ".ptx", r.ptx) &&
        write_file(base.string() + ".ptxas", r.log))
        write_file(base.string() + ".sum", sum_of(r.cubin, r.ptx, r.log));
}

void run_nvrtc(const std::string& source, const std::vector<std::string>& options, nvrtc_result& r) {
    nvrtcProgram prog = nullptr;
    const char* header = device_header().c_str();
    const char* header_name = device_header_name;
    check(nvrtcCreateProgram(&prog, source.c_str(), "kiln_fused.cu", 1, &header, &header_name), "create program");
    std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> guard(&prog, [](nvrtcProgram* p) { nvrtcDestroyProgram(p); });
    std::vector<const char*> argv;
    for (const auto& o : options) argv.push_back(o.c_str());
    const nvrtcResult compiled = nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    std::size_t n = 0;
    check(nvrtcGetProgramLogSize(prog, &n), "log size");
    r.log.assign(n, '\0');
    check(nvrtcGetProgramLog(prog, r.log.data()), "log");
    while (!r.log.empty() && r.log.back() == '\0') r.log.pop_back();
    if (compiled != NVRTC_SUCCESS)
        throw_error(error_code::runtime, std::string("NVRTC could not compile the generated kernels (") +
                                             nvrtcGetErrorString(compiled) + "):\n" + r.log);
    check(nvrtcGetCUBINSize(prog, &n), "CUBIN size");
    r.cubin.assign(n, '\0');
    check(nvrtcGetCUBIN(prog, r.cubin.data()), "CUBIN");
    check(nvrtcGetPTXSize(prog, &n), "PTX size");
    r.ptx.assign(n, '\0');
    check(nvrtcGetPTX(prog, r.ptx.data()), "PTX");
    ++stats().compiles;
}

}  // namespace

std::vector<ptxas_usage> parse_ptxas_log(const std::string& log) {
    static const std::regex props(R"(Function properties for (\S+))");
    static const std::regex usage(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
    std::vector<ptxas_usage> out;
    std::istringstream in(log);
    std::string line, function;
    std::smatch m;
    while (std::getline(in, line)) {
        if (std::regex_search(line, m, props)) {
            function = m[1];
        } else if (!function.empty() && std::regex_search(line, m, usage)) {
            out.push_back({function, std::stoul(m[1]), std::stoul(m[2]), std::stoul(m[3])});
            function.clear();
        }
    }
    return out;
}

std::vector<std::string> nvrtc_options(const std::string& arch, bool fast_math) {
    std::vector<std::string> o = {"--gpu-architecture=" + arch, "-default-device", "--std=c++17", "-Xptxas=-v"};
    o.push_back(fast_math ? "--fmad=true" : "--fmad=false");
    return o;
}

std::string nvrtc_version() {
    int major = 0, minor = 0;
    check(nvrtcVersion(&major, &minor), "version");
    return std::to_string(major) + "." + std::to_string(minor);
}

nvrtc_result compile_cuda(const std::string& source, const std::string& arch, bool fast_math,
                          const std::string& cache_dir) {
    const auto options = nvrtc_options(arch, fast_math);
    std::string id = source + "\n" + device_header() + "\n" + nvrtc_version() + "\n" + arch;
    for (const auto& o : options) id += "\n" + o;
    nvrtc_result r;
    r.key = content_hash(id);
    const fs::path base = cache_dir.empty() ? fs::path() : fs::path(cache_dir) / ("gpu-" + r.key);
    if (!cache_dir.empty() && from_cache(base, r)) {
        r.cached = true;
        ++stats().cache_hits;
    } else {
        run_nvrtc(source, options, r);
        if (!cache_dir.empty()) to_cache(base, r);
    }
    r.usage = parse_ptxas_log(r.log);
    return r;
}

nvrtc_stats& stats() {
    static nvrtc_stats s;
    return s;
}

}  // namespace kiln::gpu::codegen
