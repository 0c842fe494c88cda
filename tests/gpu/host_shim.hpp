// Runs generated gpu kernels on the CPU: the module's CUDA source (module_source) is
// compiled by the host C++ compiler as a shared object (kiln_device.h's host half turns
// kernels into functions and threadIdx & co. into variables), then each kernel is called
// once per (block, thread) of a small grid; its grid-stride loop covers every element.
#pragma once
#include "targets/gpu/codegen/device_header.hpp"

#include <kiln/argument.hpp>

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace kiln::gpu_test {

// kiln_device.h's kiln_args, as the host compiler lays it out there.
struct kiln_args {
    const void* in[64];
    void* out;
};
using host_kernel = void (*)(kiln_args);
using set_index_fn = void (*)(unsigned, unsigned, unsigned, unsigned);

class host_library {
public:
    // Compiles `source`; failures are test failures carrying the compiler's output.
    explicit host_library(const std::string& source) {
        static int counter = 0;
        dir_ = std::filesystem::temp_directory_path() /
               ("kiln_gpu_shim_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::create_directories(dir_);
        std::ofstream(dir_ / gpu::codegen::device_header_name) << gpu::codegen::device_header();
        std::ofstream(dir_ / "kernels.cpp") << source;
        const auto so = dir_ / "kernels.so";
        const std::string cmd = std::string(KILN_CXX_COMPILER) + " -std=c++17 -O1 -fPIC -shared -ffp-contract=off -w -I" +
                                dir_.string() + " " + (dir_ / "kernels.cpp").string() + " -o " + so.string() + " > " +
                                (dir_ / "log.txt").string() + " 2>&1";
        if (std::system(cmd.c_str()) != 0) {
            std::ifstream log(dir_ / "log.txt");
            ADD_FAILURE() << "host compile of the generated kernels failed:\n" << log.rdbuf();
            return;
        }
        handle_ = ::dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!handle_) ADD_FAILURE() << "dlopen: " << ::dlerror();
    }
    ~host_library() {
        if (handle_) ::dlclose(handle_);
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    bool ok() const { return handle_ != nullptr; }

    // Runs kernel `symbol` over `grid` blocks of `block` threads.
    void run(const std::string& symbol, const std::vector<argument>& inputs, argument& output, unsigned grid,
             unsigned block) const {
        auto fn = reinterpret_cast<host_kernel>(::dlsym(handle_, symbol.c_str()));
        auto set = reinterpret_cast<set_index_fn>(::dlsym(handle_, "kiln_host_set_index"));
        ASSERT_TRUE(fn && set) << symbol;
        kiln_args a{};
        for (std::size_t i = 0; i < inputs.size(); ++i) a.in[i] = inputs[i].data();
        a.out = output.data();
        for (unsigned b = 0; b < grid; ++b)
            for (unsigned t = 0; t < block; ++t) {
                set(grid, block, b, t);
                fn(a);
            }
    }

    // kiln_device.h's record of an out-of-range gather index (set, index, axis length),
    // cleared by reading it.
    std::vector<unsigned long long> take_error() const {
        std::vector<unsigned long long> e(3, 0);
        auto fn = reinterpret_cast<void (*)(unsigned long long*)>(::dlsym(handle_, "kiln_host_take_error"));
        if (fn) fn(e.data());
        else ADD_FAILURE() << "no kiln_host_take_error";
        return e;
    }

private:
    std::filesystem::path dir_;
    void* handle_ = nullptr;
};

}  // namespace kiln::gpu_test
