// Runs generated gpu kernels on the CPU: the module's CUDA source (module_source) is
// compiled by the host C++ compiler as a shared object (kiln_device.h's host half turns
// kernels into functions and threadIdx & co. into variables), then each kernel is called
// once per (block, thread) of a small grid; its grid-stride loops cover every element.
//
// A block's threads run as fibers (ucontext) on the calling thread, one block after the
// other: __syncthreads and the warp shuffles (kiln_device.h) call back here, the fiber
// waits, and the scheduler resumes the others until every live thread of the block (or
// of the warp) waits at the same barrier. One OS thread keeps the runs deterministic and
// cheap (no kernel threads per block); a barrier that can never be met is a test failure.
#pragma once
#include "targets/gpu/codegen/device_header.hpp"

#include <kiln/argument.hpp>

#include <dlfcn.h>
#include <ucontext.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
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
using set_sync_fn = void (*)(void (*)(), void (*)());

// Switching between fibers. glibc's swapcontext makes two sigprocmask system calls per
// switch, which dominated the host runs of reduction kernels (a barrier per shuffle step);
// on x86-64 a switch saves the callee-saved registers on the old stack and swaps stack
// pointers instead. A weak symbol, as every test file including this header defines it.
#if defined(__x86_64__) && defined(__linux__)
extern "C" void kiln_test_fiber_switch(void** save_sp, void* to_sp);
asm(".pushsection .text\n.weak kiln_test_fiber_switch\n.type kiln_test_fiber_switch,@function\n"
    "kiln_test_fiber_switch:\n"
    "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
    "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
    "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n  ret\n"
    ".size kiln_test_fiber_switch, .-kiln_test_fiber_switch\n.popsection\n");
struct fiber_context {
    void* sp = nullptr;
    // A fresh context that starts `entry` (which must never return) on the stack.
    void prepare(char* stack, std::size_t bytes, void (*entry)()) {
        auto* p = reinterpret_cast<void**>(reinterpret_cast<std::uintptr_t>(stack + bytes) & ~std::uintptr_t(15));
        *--p = nullptr;  // entry's return address (it never returns); keeps the call alignment
        *--p = reinterpret_cast<void*>(entry);
        for (int i = 0; i < 6; ++i) *--p = nullptr;  // the registers the first switch pops
        sp = p;
    }
    void switch_to(fiber_context& to) { kiln_test_fiber_switch(&sp, to.sp); }
};
#else
struct fiber_context {
    ucontext_t uc{};
    void prepare(char* stack, std::size_t bytes, void (*entry)()) {
        ::getcontext(&uc);
        uc.uc_stack.ss_sp = stack;
        uc.uc_stack.ss_size = bytes;
        uc.uc_link = nullptr;
        ::makecontext(&uc, entry, 0);
    }
    void switch_to(fiber_context& to) { ::swapcontext(&uc, &to.uc); }
};
#endif

// The threads of one block as fibers, and the barriers they meet at.
class fiber_block {
public:
    enum class state { ready, at_block, at_warp, done };

    // Runs fn(a) as `block` threads of block b; false when the threads wait at barriers
    // that cannot be met (the kernel would hang or misbehave on a device).
    bool run(host_kernel fn, const kiln_args& a, set_index_fn set, unsigned grid, unsigned block, unsigned b) {
        fn_ = fn;
        args_ = &a;
        if (stacks_.size() < block) stacks_.resize(block);
        ctx_.assign(block, {});
        states_.assign(block, state::ready);
        for (unsigned t = 0; t < block; ++t) {
            if (!stacks_[t]) stacks_[t] = std::make_unique<char[]>(stack_bytes);
            ctx_[t].prepare(stacks_[t].get(), stack_bytes, &fiber_block::entry);
        }
        current() = this;
        for (;;) {
            for (unsigned t = 0; t < block; ++t)
                if (states_[t] == state::ready) {
                    running_ = t;
                    set(grid, block, b, t);
                    main_.switch_to(ctx_[t]);
                }
            if (std::all_of(states_.begin(), states_.end(), [](state s) { return s == state::done; })) return true;
            if (!release(block)) return false;
        }
    }

    static void block_sync() { current()->wait(state::at_block); }
    static void warp_sync() { current()->wait(state::at_warp); }

private:
    static constexpr std::size_t stack_bytes = 64 * 1024;

    static fiber_block*& current() {
        static thread_local fiber_block* c = nullptr;
        return c;
    }
    static void entry() {
        auto* self = current();
        self->fn_(*self->args_);
        self->states_[self->running_] = state::done;
        self->ctx_[self->running_].switch_to(self->main_);  // never resumed
    }
    void wait(state s) {
        const unsigned t = running_;
        states_[t] = s;
        ctx_[t].switch_to(main_);
    }
    // Lets through every warp whose live lanes all wait at a warp barrier; else the block
    // when all its live threads wait at __syncthreads.
    bool release(unsigned block) {
        bool any = false;
        for (unsigned w = 0; w < block; w += 32) {
            const unsigned e = std::min(block, w + 32);
            bool all = true, some = false;
            for (unsigned t = w; t < e; ++t) {
                all = all && (states_[t] == state::at_warp || states_[t] == state::done);
                some = some || states_[t] == state::at_warp;
            }
            if (all && some) {
                for (unsigned t = w; t < e; ++t)
                    if (states_[t] == state::at_warp) states_[t] = state::ready;
                any = true;
            }
        }
        if (any) return true;
        if (!std::all_of(states_.begin(), states_.end(), [](state s) { return s == state::at_block || s == state::done; }))
            return false;
        for (auto& s : states_)
            if (s == state::at_block) s = state::ready;
        return true;
    }

    host_kernel fn_ = nullptr;
    const kiln_args* args_ = nullptr;
    unsigned running_ = 0;
    fiber_context main_;
    std::vector<fiber_context> ctx_;
    std::vector<state> states_;
    std::vector<std::unique_ptr<char[]>> stacks_;
};

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
    void* handle() const { return handle_; }

    // Runs kernel `symbol` over `grid` blocks of `block` threads.
    void run(const std::string& symbol, const std::vector<argument>& inputs, argument& output, unsigned grid,
             unsigned block) const {
        auto fn = reinterpret_cast<host_kernel>(::dlsym(handle_, symbol.c_str()));
        auto set = reinterpret_cast<set_index_fn>(::dlsym(handle_, "kiln_host_set_index"));
        auto set_sync = reinterpret_cast<set_sync_fn>(::dlsym(handle_, "kiln_host_set_sync"));
        ASSERT_TRUE(fn && set && set_sync) << symbol;
        set_sync(&fiber_block::block_sync, &fiber_block::warp_sync);
        kiln_args a{};
        for (std::size_t i = 0; i < inputs.size(); ++i) a.in[i] = inputs[i].data();
        a.out = output.data();
        for (unsigned b = 0; b < grid; ++b)
            if (!fibers_.run(fn, a, set, grid, block, b)) {
                ADD_FAILURE() << symbol << ": block " << b << "'s threads wait at barriers that cannot all be met";
                return;  // the stuck fibers are abandoned (their stacks stay with this library)
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
    mutable fiber_block fibers_;
};

}  // namespace kiln::gpu_test
