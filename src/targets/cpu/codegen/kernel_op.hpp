// cpu::fused_kernel: one fused group (op::fused) on the cpu target, in destination-passing
// style (the last input is the output buffer, placed by memory planning); in a generic
// program, a kernel over run-time sizes that allocates its result (generic_layout.hpp).
//
// All kernels of a program live in one shared object (one compiler run). Each module's
// first fused_kernel carries that library for saved programs: its source, and its
// machine code with the ISA level it was built for; the others name it by key. At load
// (finalize), the first kernel
//   * uses the embedded machine code when it was built for this ISA level;
//   * else compiles the source again for this machine when a compiler is available
//     (through the cache, so once per machine);
//   * else uses the embedded code if it still runs here (an older level);
//   * else leaves the kernels to the interpreter. Never an illegal instruction: code is
//     only loaded for a level the CPU supports (cpuid).
// Then every kernel finds its function by symbol, or runs in the interpreter.
//
// A call covers the plan's work units (elements or rows); large tensors are split into
// one contiguous chunk per thread of the context (OpenMP, the pool oneDNN uses too).
#pragma once
#include "ops/fused.hpp"
#include "targets/cpu/codegen/compiler.hpp"
#include "targets/cpu/codegen/generic_layout.hpp"
#include "targets/cpu/codegen/shared.hpp"

#include <kiln/operation.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct fused_kernel {
    op::fused body;
    // Set in a generic program (dims known when it runs): the kernel's loop structure
    // (generic_layout.hpp). It then takes no output buffer and allocates its result.
    codegen::generic_layout generic;
    bool fast_math = true;
    std::string symbol;   // the kernel's function in the library
    std::string library;  // the library's key
    value source;         // binary: the library's source (first kernel of a module only)
    value object;         // binary: the library's machine code (first kernel, when one was built)
    std::string object_isa;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.body, "body");
        f(self.generic, "generic");
        f(self.fast_math, "fast_math");
        f(self.symbol, "symbol");
        f(self.library, "library");
        f(self.source, "source");
        f(self.object, "object");
        f(self.object_isa, "object_isa");
    }
    std::string name() const { return "cpu::fused_kernel"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& output, const std::vector<argument>& args) const;
    void finalize(context& ctx, const shape& output, const std::vector<shape>& inputs);
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return generic.empty() ? static_cast<std::ptrdiff_t>(inputs.size()) - 1 : -1;
    }

    // Not attributes: the library the lowering just built (saves a lookup), and what
    // finalize prepared.
    std::shared_ptr<codegen::library> lib;
    struct runtime;
    std::shared_ptr<const runtime> rt;

private:
    argument compute_generic(context& ctx, const shape& output, const std::vector<argument>& args) const;
};

using kernel_fn = void (*)(const void* const*, void*, long, long);
using generic_kernel_fn = void (*)(const void* const*, void*, long, long, const long*);

// How a finalized kernel runs: "compiled", "interpreted" or "reference" (no plan), for
// tests and diagnostics; "" before finalize.
std::string kernel_mode(const operation& op);

}  // namespace kiln::cpu
