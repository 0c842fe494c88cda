// Turning kernel source into loaded machine code: the host compiler, the on-disk cache,
// loading shared objects (also from the bytes embedded in a saved program), and a
// process-wide table so that programs with equal kernels share one loaded library.
//
// The settings below come from cpu_options (cpu_options.hpp: read from the environment
// once per context, so a program compiles and loads with the settings it started with).
// Compiler: $KILN_CXX (a path or a name on PATH), else g++, else c++. None found (or
// $KILN_CXX naming nothing runnable) means "no compiler": kernels then come from the
// cache or a saved program, or run in the interpreter.
// Cache: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln. An entry is
// <key>.so plus <key>.sum (size and content hash of the object); an entry whose object
// does not match its sum is ignored, deleted and rebuilt. The key hashes the source, the
// flags, the ISA level and the compiler's identity (path, size, modification time).
// Files are written under temporary names and renamed, so concurrent processes never
// see half an object.
#pragma once
#include "targets/cpu/cpu_options.hpp"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu::codegen {

// A loaded shared object (dlopen); unloaded when the last kernel using it goes.
class library {
public:
    library(void* handle, std::string key, std::string isa);
    ~library();
    library(const library&) = delete;
    library& operator=(const library&) = delete;
    // The address of an exported function, or nullptr.
    void* symbol(const std::string& name) const;
    const std::string& key() const { return key_; }
    const std::string& isa() const { return isa_; }

private:
    void* handle_;
    std::string key_, isa_;
};

struct compiler_info {
    std::string path;
    std::string id;  // path, size and modification time: part of cache keys
};
// The compiler o.cxx names (looked for on o.search_path), or g++, or c++.
std::optional<compiler_info> find_compiler(const cpu_options& o);

std::vector<std::string> compile_flags(const std::string& isa, bool fast_math);

struct build_result {
    std::string key;     // cache key (names the library in saved programs)
    std::string object;  // the shared object's bytes (empty when none could be built)
    std::shared_ptr<library> lib;  // loaded, when the object runs on this CPU
};
// The library for `source` at ISA level `isa`: from this process's table, the cache,
// or the compiler (one run for all of a program's kernels). Without a compiler and a
// cache entry, the result is empty; a failing compiler prints one warning to stderr.
// The cache folder is o.cache_dir (none when it is "").
build_result build_library(const std::string& source, const std::string& isa, bool fast_math,
                           const cpu_options& o);

// A library from the bytes of an embedded object: loaded through the cache folder (or an
// anonymous memory file when there is none); nullptr when it cannot run on this CPU.
std::shared_ptr<library> load_object(const std::string& key, const std::string& isa, const std::string& object,
                                     const cpu_options& o);

// The table of loaded libraries by key (weak: libraries go when their kernels go).
std::shared_ptr<library> find_library(const std::string& key);
void register_library(const std::string& key, const std::shared_ptr<library>& lib);

// Counters for tests and `KILN_CODEGEN_VERBOSE=1` diagnostics.
struct codegen_stats {
    std::atomic<std::size_t> compiles{0};        // compiler runs that produced an object
    std::atomic<std::size_t> compile_failures{0};
    std::atomic<std::size_t> cache_hits{0};
    std::atomic<std::size_t> cache_rejects{0};   // entries ignored as corrupt
    std::atomic<std::size_t> embedded_loads{0};  // libraries loaded from a saved program's bytes
    std::atomic<std::size_t> interpreted{0};     // kernels finalized without machine code
    // Calls of a compiled generic kernel whose arguments did not fit its layout (run by
    // the interpreter instead: generic_layout.hpp).
    std::atomic<std::size_t> generic_misfits{0};
    // Calls that fit once their strided views were copied into the kernel's walk order.
    std::atomic<std::size_t> generic_packed{0};
};
codegen_stats& stats();

}  // namespace kiln::cpu::codegen
