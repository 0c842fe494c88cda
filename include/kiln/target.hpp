// A target: its compile pipeline (passes), its execution context, and its memory
// (allocation and host<->target copies). `ref` and `cpu` keep data in host memory;
// a device target (CUDA) allocates device memory and runs asynchronously on the
// context's stream, which is why these hooks exist from the start.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/compile_options.hpp>
#include <kiln/context.hpp>
#include <kiln/pass.hpp>

#include <memory>
#include <string>
#include <vector>

namespace kiln {

class target {
public:
    virtual ~target() = default;
    virtual std::string name() const = 0;
    // Why this target cannot run on this machine ("no CUDA device"); empty when it can.
    virtual std::string unavailable_reason() const { return {}; }
    // Why it cannot compile programs here; by default why it cannot run. A target whose
    // compiler needs no device (gpu: NVRTC) says "" and compiles ahead, for a machine that
    // has one; running such a program here is refused by its context (begin_run).
    virtual std::string compile_unavailable_reason() const { return unavailable_reason(); }

    virtual std::shared_ptr<context> make_context(const compile_options& opts) const = 0;
    // A context for a program compiled on behalf of one whose context is `parent` (a
    // dynamic program's specializations, compiled later, maybe in the background): the
    // cpu target hands down the options it read (not the environment as it is by then)
    // and its tuning table. By default, a new context.
    virtual std::shared_ptr<context> derive_context(const context& parent, const compile_options& opts) const {
        (void)parent;
        return make_context(opts);
    }
    // The lowering pipeline, run after the target-independent passes.
    virtual std::vector<pass> get_passes(context& ctx, const compile_options& opts) const = 0;

    // Where this target's buffers live, and how to get data there and back.
    virtual memory_location location() const { return memory_location::host; }
    virtual argument allocate(const shape& s, context&) const { return argument(s); }
    virtual argument copy_to_target(const argument& host, context&) const { return host; }
    // offload_copy's copy of the input `name` for an eval that holds `arena` (empty without
    // planning): a device target may keep one buffer per (arena, input) so that an eval's
    // inputs sit at the same addresses every time (context::run_eval can then replay it).
    // By default, copy_to_target.
    virtual argument copy_input_to_target(const std::string& name, const argument& host, const argument& arena,
                                          context& ctx) const {
        (void)name;
        (void)arena;
        return copy_to_target(host, ctx);
    }
    virtual argument copy_to_host(const argument& data, context&) const { return data; }
};

// Registers (or replaces) the target of that name.
void register_target(std::shared_ptr<const target> t);
// A target built as a module of its own: a shared library in libkiln's folder, loaded by the
// first get_target(name), whose static initializers register the target and its operators.
// Until then the name is known and nothing of it is mapped: the gpu target's CUDA libraries
// cost every process that maps them ~0.7 s at start, a CLI call or `import kiln` on a CPU
// included. A module that fails to load becomes a target that says why (the loader's error).
void register_target_module(const std::string& name, const std::string& file_name);
// A target that neither compiles nor runs here, and says why ("built without CUDA").
std::shared_ptr<const target> make_unavailable_target(const std::string& name, const std::string& why);
// Throws a kiln invalid_argument error naming the known targets when `name` is unknown.
std::shared_ptr<const target> get_target(const std::string& name);
// Every known name, modules not yet loaded included (listing them loads nothing).
std::vector<std::string> get_target_names();

}  // namespace kiln
