// The structs behind kiln.h's opaque handles, and the guard every C function runs its
// body in. Each handle starts with a tag naming its kind, so a NULL handle, one of the
// wrong kind (a kiln_shape passed as a kiln_program) and one already destroyed (tag
// cleared) are refused with KILN_STATUS_INVALID_ARGUMENT instead of being used.
#pragma once
#include <kiln/kiln.h>

#include <kiln/argument.hpp>
#include <kiln/compile_options.hpp>
#include <kiln/errors.hpp>
#include <kiln/module.hpp>
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace kiln::capi {

// Distinct 64-bit tags ("KLN" + a kind letter), unlikely to be found in other memory.
enum class tag : std::uint64_t {
    onnx_options = 0x4b4c4e00'6f6e6e78,
    compile_options = 0x4b4c4e00'636f6d70,
    file_options = 0x4b4c4e00'66696c65,
    target = 0x4b4c4e00'74617267,
    shape = 0x4b4c4e00'73686170,
    argument = 0x4b4c4e00'61726775,
    arguments = 0x4b4c4e00'61726773,
    params = 0x4b4c4e00'70617261,
    program = 0x4b4c4e00'70726f67,
    module = 0x4b4c4e00'6d6f6475,
    instruction = 0x4b4c4e00'696e7374,
};

[[noreturn]] void invalid(const std::string& message);

// Checks that `h` is a live handle of its kind; names the parameter otherwise.
template <class H>
H& get(H* h, const char* what) {
    if (h == nullptr) invalid(std::string("'") + what + "' is NULL");
    if (h->kind != H::expected) invalid(std::string("'") + what + "' is not a live " + H::kind_name + " handle");
    return *h;
}

// Checks a required pointer argument (an output, a name, a path).
template <class T>
T* need(T* p, const char* what) {
    if (p == nullptr) invalid(std::string("'") + what + "' is NULL");
    return p;
}

// Frees a handle made with `new`, clearing its tag first so later use is refused.
template <class H>
void destroy(H* h, const char* what) {
    get(h, what).kind = tag{0};
    delete h;
}

// Runs `body`, turning every exception into a status and this thread's message.
kiln_status fail(kiln_status status, const char* prefix, const char* message) noexcept;
template <class F>
kiln_status guarded(const char* function, F&& body) noexcept {
    try {
        body();
        return KILN_STATUS_SUCCESS;
    } catch (const kiln::error& e) {
        return fail(static_cast<kiln_status>(e.code()), function, e.what());
    } catch (const std::bad_alloc&) {
        return fail(KILN_STATUS_OUT_OF_MEMORY, function, "out of memory: an allocation failed");
    } catch (const std::exception& e) {
        return fail(KILN_STATUS_RUNTIME, function, e.what());
    } catch (...) {
        return fail(KILN_STATUS_RUNTIME, function, "runtime error: an unknown exception");
    }
}

kiln::type to_type(kiln_type t);
kiln_type from_type(kiln::type t);
const char* c_str(const std::string& s);

}  // namespace kiln::capi

#define KILN_HANDLE(NAME, EXPECTED)                                        \
    static constexpr kiln::capi::tag expected = kiln::capi::tag::EXPECTED; \
    static constexpr const char* kind_name = NAME;                         \
    kiln::capi::tag kind = expected

struct kiln_onnx_options_t {
    KILN_HANDLE("kiln_onnx_options", onnx_options);
    kiln::onnx_options options;
};
struct kiln_compile_options_t {
    KILN_HANDLE("kiln_compile_options", compile_options);
    kiln::compile_options options;
};
struct kiln_file_options_t {
    KILN_HANDLE("kiln_file_options", file_options);
    kiln::load_options options;
};
struct kiln_target_t {
    KILN_HANDLE("kiln_target", target);
    std::shared_ptr<const kiln::target> target;
    std::string name, reason;
};
// The shape with what the getters hand out as arrays, computed once at creation.
struct kiln_shape_t {
    KILN_HANDLE("kiln_shape", shape);
    kiln::shape shape;
    std::vector<std::size_t> lens, strides;
    std::vector<kiln::dynamic_dimension> dims;
    std::vector<std::vector<std::size_t>> optimals;
    std::string text;
};
struct kiln_argument_t {
    KILN_HANDLE("kiln_argument", argument);
    kiln::argument argument;
};
struct kiln_arguments_t {
    KILN_HANDLE("kiln_arguments", arguments);
    std::vector<kiln::argument> items;
};
struct kiln_params_t {
    KILN_HANDLE("kiln_params", params);
    kiln::param_map map;
};
// A module of a program built by hand, and its instructions: owned by the program's handle.
struct kiln_module_t {
    KILN_HANDLE("kiln_module", module);
    kiln_program_t* owner = nullptr;
    kiln::module_ref mod = nullptr;
    std::string text;
};
struct kiln_instruction_t {
    KILN_HANDLE("kiln_instruction", instruction);
    kiln_module_t* module = nullptr;
    kiln::instruction_ref ins;
};
// Names are read once (they never change, compile included), so the getters hand out
// stable pointers without locking; `text` is guarded because it is rebuilt per call. A
// program built by hand re-reads them after each add (not thread-safe, as any change).
struct kiln_program_t {
    KILN_HANDLE("kiln_program", program);
    std::shared_ptr<kiln::program> program;
    std::vector<std::string> inputs, outputs;
    std::mutex text_mutex;
    std::string text;
    std::unique_ptr<kiln_module_t> main_module;       // made on first request
    std::deque<kiln_instruction_t> instructions;      // stable addresses as it grows
};

namespace kiln::capi {
kiln_shape new_shape(const kiln::shape& s);
kiln_program new_program(kiln::program p);
}  // namespace kiln::capi
