#include "targets/cpu/codegen/compiler.hpp"

#include "targets/cpu/codegen/shared.hpp"
#include "targets/cpu/codegen/isa.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <mutex>
#include <sstream>
#include <unordered_map>

extern char** environ;

namespace kiln::cpu::codegen {

namespace fs = std::filesystem;

namespace {

std::optional<std::string> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return std::nullopt;
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (f.bad()) return std::nullopt;
    return s;
}

// Writes `bytes` to `path` through a temporary file in the same folder and a rename.
bool write_atomically(const std::string& path, const std::string& bytes) {
    static std::atomic<unsigned> counter{0};
    std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "_" + std::to_string(counter++);
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) return false;
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        if (!f) {
            std::error_code ec;
            fs::remove(tmp, ec);
            return false;
        }
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) fs::remove(tmp, ec);
    return !ec;
}

std::string sum_of(const std::string& bytes) { return std::to_string(bytes.size()) + " " + content_hash(bytes) + "\n"; }

std::string entry_path(const std::string& dir, const std::string& key) { return dir + "/" + key + ".so"; }

// The cached object for `key` when its sum matches; a mismatching entry is deleted.
std::optional<std::string> cached_object(const std::string& dir, const std::string& key, bool verbose) {
    if (dir.empty()) return std::nullopt;
    const auto so = entry_path(dir, key);
    auto bytes = read_file(so);
    if (!bytes) return std::nullopt;
    auto sum = read_file(dir + "/" + key + ".sum");
    if (sum && *sum == sum_of(*bytes)) return bytes;
    ++stats().cache_rejects;
    if (verbose) std::cerr << "[kiln] codegen: ignoring corrupt cache entry " << so << "\n";
    std::error_code ec;
    fs::remove(so, ec);
    fs::remove(dir + "/" + key + ".sum", ec);
    return std::nullopt;
}

bool store_object(const std::string& dir, const std::string& key, const std::string& bytes) {
    if (dir.empty()) return false;
    std::error_code ec;
    fs::create_directories(dir, ec);
    return write_atomically(entry_path(dir, key), bytes) && write_atomically(dir + "/" + key + ".sum", sum_of(bytes));
}

// dlopen of an object: the cache entry when it holds these bytes, else a memory file.
std::shared_ptr<library> open_object(const std::string& dir, const std::string& key, const std::string& isa,
                                     const std::string& bytes, bool verbose) {
    void* h = nullptr;
    if (!dir.empty()) {
        auto cached = cached_object(dir, key, verbose);
        if (cached && *cached == bytes) h = ::dlopen(entry_path(dir, key).c_str(), RTLD_NOW | RTLD_LOCAL);
        else if (store_object(dir, key, bytes)) h = ::dlopen(entry_path(dir, key).c_str(), RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
        int fd = ::memfd_create("kiln-kernels", MFD_CLOEXEC);
        if (fd >= 0) {
            if (::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size())) {
                const std::string p = "/proc/self/fd/" + std::to_string(fd);
                h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
            }
            ::close(fd);
        }
    }
    if (!h) {
        if (verbose) std::cerr << "[kiln] codegen: cannot load kernels: " << ::dlerror() << "\n";
        return nullptr;
    }
    return std::make_shared<library>(h, key, isa);
}

std::mutex& table_mutex() {
    static std::mutex m;
    return m;
}
std::unordered_map<std::string, std::weak_ptr<library>>& table() {
    static std::unordered_map<std::string, std::weak_ptr<library>> t;
    return t;
}

std::optional<std::string> resolve(const std::string& name, const std::string& search_path) {
    auto runnable = [](const std::string& p) {
        struct stat st {};
        return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
    };
    if (name.find('/') != std::string::npos) return runnable(name) ? std::optional<std::string>(name) : std::nullopt;
    std::stringstream dirs(search_path);
    std::string d;
    while (std::getline(dirs, d, ':'))
        if (!d.empty() && runnable(d + "/" + name)) return d + "/" + name;
    return std::nullopt;
}

// Runs the compiler; its output goes to `log`. True when it exits with status 0.
bool run_compiler(const std::string& cxx, const std::vector<std::string>& args, const std::string& log) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(cxx.c_str()));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, cxx.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return false;
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) return false;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

build_result build_library_impl(const std::string& source, const std::string& isa, bool fast_math,
                                const cpu_options& o);

library::library(void* handle, std::string key, std::string isa)
    : handle_(handle), key_(std::move(key)), isa_(std::move(isa)) {}
library::~library() {
    if (handle_) ::dlclose(handle_);
}
void* library::symbol(const std::string& name) const { return ::dlsym(handle_, name.c_str()); }

codegen_stats& stats() {
    static codegen_stats s;
    return s;
}

std::optional<compiler_info> find_compiler(const cpu_options& o) {
    std::optional<std::string> path;
    if (!o.cxx.empty()) {
        path = resolve(o.cxx, o.search_path);
    } else {
        path = resolve("g++", o.search_path);
        if (!path) path = resolve("c++", o.search_path);
    }
    if (!path) return std::nullopt;
    struct stat st {};
    if (::stat(path->c_str(), &st) != 0) return std::nullopt;
    compiler_info c;
    c.path = *path;
    c.id = *path + "|" + std::to_string(st.st_size) + "|" + std::to_string(st.st_mtim.tv_sec);
    return c;
}

std::vector<std::string> compile_flags(const std::string& isa, bool fast_math) {
    std::vector<std::string> f{"-x", "c++", "-std=c++17", "-O3", "-fPIC", "-shared", "-w", "-fvisibility=hidden",
                               "-fno-exceptions", "-fno-rtti", "-fno-math-errno", "-fno-trapping-math",
                               "-fopenmp-simd"};
    // Off: no fused multiply-adds, so that results match the reference kernels bit for bit.
    f.push_back(fast_math ? "-ffp-contract=fast" : "-ffp-contract=off");
    for (auto& x : isa_flags(isa)) f.push_back(x);
    return f;
}

std::shared_ptr<library> find_library(const std::string& key) {
    std::lock_guard<std::mutex> lock(table_mutex());
    auto it = table().find(key);
    return it == table().end() ? nullptr : it->second.lock();
}

void register_library(const std::string& key, const std::shared_ptr<library>& lib) {
    std::lock_guard<std::mutex> lock(table_mutex());
    table()[key] = lib;
}

build_result build_library(const std::string& source, const std::string& isa, bool fast_math,
                           const cpu_options& o) {
    // Nothing here may fail a compilation: any trouble means "no machine code".
    try {
        return build_library_impl(source, isa, fast_math, o);
    } catch (const std::exception& e) {
        std::cerr << "[kiln] warning: fused kernels not built: " << e.what() << "\n";
        return {};
    }
}

build_result build_library_impl(const std::string& source, const std::string& isa, bool fast_math,
                                const cpu_options& o) {
    build_result r;
    auto cxx = find_compiler(o);
    if (!cxx) return r;
    const auto flags = compile_flags(isa, fast_math);
    std::string keyed = source + "\n";
    for (const auto& f : flags) keyed += f + " ";
    keyed += "\n" + isa + "\n" + cxx->id;
    r.key = content_hash(keyed);
    const bool runs = can_run(isa);
    if (runs)
        if (auto lib = find_library(r.key)) {
            r.lib = lib;
            // The bytes are needed for saved programs; the cache has them.
            if (auto bytes = cached_object(o.cache_dir, r.key, o.codegen_verbose)) {
                r.object = *bytes;
                return r;
            }
            r.lib = nullptr;
        }
    const std::string& dir = o.cache_dir;
    if (auto bytes = cached_object(dir, r.key, o.codegen_verbose)) {
        ++stats().cache_hits;
        r.object = *bytes;
    } else {
        // Work in a private temporary folder.
        std::string base = (fs::temp_directory_path() / "kiln-cc-XXXXXX").string();
        std::vector<char> tmpl(base.begin(), base.end());
        tmpl.push_back('\0');
        if (!::mkdtemp(tmpl.data())) return r;
        const std::string tmp = tmpl.data();
        const std::string src = tmp + "/kernels.cpp", out = tmp + "/kernels.so", log = tmp + "/log.txt";
        bool ok = false;
        {
            std::ofstream f(src, std::ios::binary);
            f << source;
            ok = static_cast<bool>(f);
        }
        if (ok) {
            auto args = flags;
            args.push_back("-o");
            args.push_back(out);
            args.push_back(src);
            ok = run_compiler(cxx->path, args, log);
        }
        auto built = ok ? read_file(out) : std::nullopt;
        if (built && !built->empty()) {
            ++stats().compiles;
            r.object = *built;
            store_object(dir, r.key, r.object);
        } else {
            ++stats().compile_failures;
            auto text = read_file(log).value_or("");
            std::cerr << "[kiln] warning: compiling fused kernels with " << cxx->path
                      << " failed; they run in the interpreter. " << text.substr(0, 2000) << "\n";
        }
        std::error_code ec;
        fs::remove_all(tmp, ec);
        if (r.object.empty()) return r;
    }
    if (runs) {
        r.lib = open_object(dir, r.key, isa, r.object, o.codegen_verbose);
        if (r.lib) register_library(r.key, r.lib);
    }
    return r;
}

std::shared_ptr<library> load_object(const std::string& key, const std::string& isa, const std::string& object,
                                     const cpu_options& o) {
    if (object.empty() || !can_run(isa)) return nullptr;
    try {
    if (auto lib = find_library(key)) return lib;
    auto lib = open_object(o.cache_dir, key, isa, object, o.codegen_verbose);
    if (lib) {
        ++stats().embedded_loads;
        register_library(key, lib);
    }
    return lib;
    } catch (const std::exception&) {
        return nullptr;
    }
}

}  // namespace kiln::cpu::codegen
