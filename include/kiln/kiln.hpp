// kiln.hpp: a header-only C++17 wrapper over Kiln's stable C API (kiln.h). This is how
// applications use Kiln from C++: RAII handles, and a kiln::api::error subclass per
// status code. It depends on nothing but kiln.h, so an application built against it
// keeps working with a newer libkiln_c. (The other headers in include/kiln are Kiln's
// internal C++ API, for code that extends Kiln.)
//
//     auto p = kiln::api::parse_onnx("model.onnx", kiln::api::onnx_options().input_dims("input", {1, 3, 224, 224}));
//     p.compile(kiln::api::target("cpu"));
//     auto out = p.run({{"input", kiln::api::argument(p.input_shape("input"), pixels)}});
//     std::vector<float> logits = out[0].to_vector<float>();
#pragma once
#include <kiln/kiln.h>

#include <cstddef>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::api {

// Every failure: what() is kiln_last_error_message(), status() the C status.
class error : public std::runtime_error {
public:
    error(kiln_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
    kiln_status status() const noexcept { return status_; }

private:
    kiln_status status_;
};
#define KILN_API_ERROR(NAME) \
    struct NAME : error {    \
        using error::error;  \
    }
KILN_API_ERROR(parse_error);
KILN_API_ERROR(unsupported_error);
KILN_API_ERROR(shape_error);
KILN_API_ERROR(type_error);
KILN_API_ERROR(io_error);
KILN_API_ERROR(runtime_error);
KILN_API_ERROR(out_of_memory_error);
KILN_API_ERROR(invalid_argument_error);
#undef KILN_API_ERROR

// Throws the exception of `status` (anything but success).
inline void check(kiln_status status) {
    if (status == KILN_STATUS_SUCCESS) return;
    std::string m = kiln_last_error_message();
    switch (status) {
        case KILN_STATUS_PARSE:
            throw parse_error(status, m);
        case KILN_STATUS_UNSUPPORTED:
            throw unsupported_error(status, m);
        case KILN_STATUS_SHAPE:
            throw shape_error(status, m);
        case KILN_STATUS_TYPE:
            throw type_error(status, m);
        case KILN_STATUS_IO:
            throw io_error(status, m);
        case KILN_STATUS_RUNTIME:
            throw runtime_error(status, m);
        case KILN_STATUS_OUT_OF_MEMORY:
            throw out_of_memory_error(status, m);
        case KILN_STATUS_INVALID_ARGUMENT:
            throw invalid_argument_error(status, m);
        default:
            throw error(status, m);
    }
}

namespace detail {
// A C handle shared by copies of its wrapper, destroyed with the last one.
template <class H, kiln_status (*Destroy)(H)>
class handle {
public:
    handle() = default;
    explicit handle(H h) : h_(h, [](H x) { Destroy(x); }) {}
    H get() const { return h_.get(); }

private:
    std::shared_ptr<std::remove_pointer_t<H>> h_;
};
// Calls a C getter taking (handle, ..., T* out) and returns *out.
template <class T, class F, class... A>
T out(F f, A... args) {
    T value{};
    check(f(args..., &value));
    return value;
}
}  // namespace detail

inline std::string version() { return detail::out<const char*>(kiln_version_string); }

struct dynamic_dimension {
    std::size_t min = 0, max = 0;
    std::vector<std::size_t> optimals;
    std::string symbol;
};

class shape {
public:
    // A row-major tensor shape (strides in elements when given).
    shape(kiln_type type, const std::vector<std::size_t>& lens, const std::vector<std::size_t>& strides = {}) {
        kiln_shape s = nullptr;
        check(kiln_shape_create(type, lens.data(), lens.size(), strides.empty() ? nullptr : strides.data(), &s));
        h_ = decltype(h_)(s);
    }
    explicit shape(kiln_shape owned) : h_(owned) {}
    kiln_shape get() const { return h_.get(); }

    kiln_shape_kind kind() const { return detail::out<kiln_shape_kind>(kiln_shape_kind_of, get()); }
    kiln_type type() const { return detail::out<kiln_type>(kiln_shape_type, get()); }
    std::vector<std::size_t> lens() const { return array(kiln_shape_lens); }
    std::vector<std::size_t> strides() const { return array(kiln_shape_strides); }
    bool dynamic() const { return detail::out<int>(kiln_shape_is_dynamic, get()) != 0; }
    dynamic_dimension dyn_dim(std::size_t i) const {
        dynamic_dimension d;
        check(kiln_shape_dyn_dim(get(), i, &d.min, &d.max));
        const std::size_t* opt = nullptr;
        std::size_t n = 0;
        check(kiln_shape_dyn_dim_optimals(get(), i, &opt, &n));
        d.optimals.assign(opt, opt + n);
        d.symbol = detail::out<const char*>(kiln_shape_dyn_dim_symbol, get(), i);
        return d;
    }
    std::size_t elements() const { return detail::out<std::size_t>(kiln_shape_elements, get()); }
    std::size_t bytes() const { return detail::out<std::size_t>(kiln_shape_bytes, get()); }
    std::string to_string() const { return detail::out<const char*>(kiln_shape_to_string, get()); }

private:
    std::vector<std::size_t> array(kiln_status (*f)(kiln_shape, const std::size_t**, std::size_t*)) const {
        const std::size_t* p = nullptr;
        std::size_t n = 0;
        check(f(get(), &p, &n));
        return std::vector<std::size_t>(p, p + n);
    }
    detail::handle<kiln_shape, kiln_shape_destroy> h_;
};

class argument {
public:
    // Owns a copy of `data` (shape.bytes() bytes); zeros when data is null.
    explicit argument(const shape& s, const void* data = nullptr) {
        kiln_argument a = nullptr;
        check(kiln_argument_create(s.get(), data, s.bytes(), &a));
        h_ = decltype(h_)(a);
    }
    template <class T>
    argument(const shape& s, const std::vector<T>& values) {
        kiln_argument a = nullptr;
        check(kiln_argument_create(s.get(), values.data(), values.size() * sizeof(T), &a));
        h_ = decltype(h_)(a);
    }
    // Borrows the caller's memory (no copy): it must outlive every use of the argument.
    static argument wrap(const shape& s, void* data, std::size_t size) {
        kiln_argument a = nullptr;
        check(kiln_argument_wrap(s.get(), data, size, &a));
        return argument(a);
    }
    static argument read_tensor_proto(const std::string& path) {
        return argument(detail::out<kiln_argument>(kiln_argument_read_tensor_proto, path.c_str()));
    }
    explicit argument(kiln_argument owned) : h_(owned) {}
    kiln_argument get() const { return h_.get(); }

    shape get_shape() const { return shape(detail::out<kiln_shape>(kiln_argument_shape, get())); }
    void* data() const { return detail::out<void*>(kiln_argument_data, get()); }
    // The elements in row-major order; T must be the element type's size.
    template <class T>
    std::vector<T> to_vector() const {
        std::vector<T> v(get_shape().elements());
        check(kiln_argument_copy_to(get(), v.data(), v.size() * sizeof(T)));
        return v;
    }
    // A tuple's, sequence's or optional's elements (a tensor has none: error).
    std::vector<argument> elements() const {
        std::vector<argument> v;
        for (std::size_t i = 0, n = detail::out<std::size_t>(kiln_argument_element_count, get()); i < n; ++i)
            v.emplace_back(detail::out<kiln_argument>(kiln_argument_element, get(), i));
        return v;
    }
    void write_tensor_proto(const std::string& name, const std::string& path) const {
        check(kiln_argument_write_tensor_proto(get(), name.c_str(), path.c_str()));
    }

private:
    detail::handle<kiln_argument, kiln_argument_destroy> h_;
};

class onnx_options {
public:
    onnx_options() : h_(detail::out<kiln_onnx_options>(kiln_onnx_options_create)) {}
    kiln_onnx_options get() const { return h_.get(); }
    onnx_options& default_dim_value(std::size_t v) { return set(kiln_onnx_options_set_default_dim_value(get(), v)); }
    onnx_options& default_dyn_dim_value(std::size_t min, std::size_t max,
                                        const std::vector<std::size_t>& optimals = {}) {
        return set(kiln_onnx_options_set_default_dyn_dim_value(get(), min, max, optimals.data(), optimals.size()));
    }
    onnx_options& input_dims(const std::string& input, const std::vector<std::size_t>& dims) {
        return set(kiln_onnx_options_set_input_dims(get(), input.c_str(), dims.data(), dims.size()));
    }
    onnx_options& dyn_input_dims(const std::string& input, const std::vector<dynamic_dimension>& dims) {
        std::vector<std::size_t> lo, hi;
        for (auto& d : dims) lo.push_back(d.min), hi.push_back(d.max);
        set(kiln_onnx_options_set_dyn_input_dims(get(), input.c_str(), lo.data(), hi.data(), dims.size()));
        for (std::size_t i = 0; i < dims.size(); ++i)
            if (!dims[i].optimals.empty())
                set(kiln_onnx_options_set_dyn_input_dim_optimals(get(), input.c_str(), i, dims[i].optimals.data(),
                                                                 dims[i].optimals.size()));
        for (std::size_t i = 0; i < dims.size(); ++i)
            if (!dims[i].symbol.empty())
                set(kiln_onnx_options_set_dyn_input_dim_symbol(get(), input.c_str(), i, dims[i].symbol.c_str()));
        return *this;
    }
    onnx_options& skip_unknown_operators(bool on) {
        return set(kiln_onnx_options_set_skip_unknown_operators(get(), on));
    }
    onnx_options& max_loop_iterations(std::size_t n) {
        return set(kiln_onnx_options_set_max_loop_iterations(get(), n));
    }
    onnx_options& limit_max_iterations(bool on) { return set(kiln_onnx_options_set_limit_max_iterations(get(), on)); }
    onnx_options& external_data_path(const std::string& p) {
        return set(kiln_onnx_options_set_external_data_path(get(), p.c_str()));
    }

private:
    onnx_options& set(kiln_status s) { return check(s), *this; }
    detail::handle<kiln_onnx_options, kiln_onnx_options_destroy> h_;
};

class compile_options {
public:
    compile_options() : h_(detail::out<kiln_compile_options>(kiln_compile_options_create)) {}
    kiln_compile_options get() const { return h_.get(); }
    compile_options& offload_copy(bool on) { return set(kiln_compile_options_set_offload_copy(get(), on)); }
    compile_options& device_id(int id) { return set(kiln_compile_options_set_device_id(get(), id)); }
    compile_options& fast_math(bool on) { return set(kiln_compile_options_set_fast_math(get(), on)); }
    compile_options& tf32(bool on) { return set(kiln_compile_options_set_tf32(get(), on)); }
    compile_options& gpu_arch(const std::string& arch) { return set(kiln_compile_options_set_gpu_arch(get(), arch.c_str())); }
    compile_options& exhaustive_tune(bool on) { return set(kiln_compile_options_set_exhaustive_tune(get(), on)); }
    compile_options& threads(std::size_t n) { return set(kiln_compile_options_set_threads(get(), n)); }
    compile_options& max_specializations(std::size_t n) {
        return set(kiln_compile_options_set_max_specializations(get(), n));
    }
    compile_options& specialize_after(std::size_t n) {
        return set(kiln_compile_options_set_specialize_after(get(), n));
    }
    compile_options& dynamic_buckets(const std::string& dim, const std::vector<std::size_t>& sizes) {
        return set(kiln_compile_options_add_dynamic_buckets(get(), dim.c_str(), sizes.data(), sizes.size()));
    }

private:
    compile_options& set(kiln_status s) { return check(s), *this; }
    detail::handle<kiln_compile_options, kiln_compile_options_destroy> h_;
};

class target {
public:
    explicit target(const std::string& name) : h_(detail::out<kiln_target>(kiln_target_get, name.c_str())) {}
    kiln_target get() const { return h_.get(); }
    std::string name() const { return detail::out<const char*>(kiln_target_name, get()); }
    // Empty when the target can run on this machine.
    std::string unavailable_reason() const {
        int available = 0;
        const char* reason = nullptr;
        check(kiln_target_available(get(), &available, &reason));
        return available ? std::string() : std::string(reason);
    }
    bool available() const { return unavailable_reason().empty(); }
    // Every target of this build, available here or not.
    static std::vector<std::string> names() {
        std::vector<std::string> v;
        for (std::size_t i = 0, n = detail::out<std::size_t>(kiln_target_count); i < n; ++i)
            v.emplace_back(detail::out<const char*>(kiln_target_name_at, i));
        return v;
    }

private:
    detail::handle<kiln_target, kiln_target_destroy> h_;
};

struct memory_usage {
    std::size_t arena_bytes = 0, parameter_bytes = 0, literal_bytes = 0, output_bytes = 0;
};

// An instruction of a program being built (belongs to the program).
class instruction {
public:
    explicit instruction(kiln_instruction h) : h_(h) {}
    kiln_instruction get() const { return h_; }
    shape get_shape() const { return shape(detail::out<kiln_shape>(kiln_instruction_shape, h_)); }

private:
    kiln_instruction h_;
};

// The main module of a program being built (belongs to the program).
class module {
public:
    explicit module(kiln_module h) : h_(h) {}
    instruction add_parameter(const std::string& name, const shape& s) {
        return instruction(detail::out<kiln_instruction>(kiln_module_add_parameter, h_, name.c_str(), s.get()));
    }
    instruction add_literal(const argument& value) {
        return instruction(detail::out<kiln_instruction>(kiln_module_add_literal, h_, value.get()));
    }
    // attributes_json: a JSON object, e.g. R"({"padding": [1, 1, 1, 1]})".
    instruction add_instruction(const std::string& op, const std::string& attributes_json,
                                const std::vector<instruction>& inputs) {
        auto ins = handles(inputs);
        return instruction(detail::out<kiln_instruction>(kiln_module_add_instruction, h_, op.c_str(),
                                                         attributes_json.c_str(), ins.data(), ins.size()));
    }
    void add_return(const std::vector<instruction>& inputs) {
        auto ins = handles(inputs);
        check(kiln_module_add_return(h_, ins.data(), ins.size()));
    }
    std::string to_string() const { return detail::out<const char*>(kiln_module_to_string, h_); }

private:
    static std::vector<kiln_instruction> handles(const std::vector<instruction>& v) {
        std::vector<kiln_instruction> out;
        for (auto& i : v) out.push_back(i.get());
        return out;
    }
    kiln_module h_;
};

class program {
public:
    // An empty program, to build through get_main_module().
    program() : h_(detail::out<kiln_program>(kiln_program_create)) {}
    explicit program(kiln_program owned) : h_(owned) {}
    module get_main_module() const { return module(detail::out<kiln_module>(kiln_program_get_main_module, get())); }
    kiln_program get() const { return h_.get(); }

    std::vector<std::string> input_names() const { return names(kiln_program_input_count, kiln_program_input_name); }
    std::vector<std::string> output_names() const { return names(kiln_program_output_count, kiln_program_output_name); }
    shape input_shape(const std::string& name) const {
        return shape(detail::out<kiln_shape>(kiln_program_input_shape, get(), name.c_str()));
    }
    shape output_shape(std::size_t i) const {
        return shape(detail::out<kiln_shape>(kiln_program_output_shape, get(), i));
    }

    void compile(const target& t, const compile_options& o = compile_options()) {
        check(kiln_program_compile(get(), t.get(), o.get()));
    }
    bool is_compiled() const { return detail::out<int>(kiln_program_is_compiled, get()) != 0; }
    // Before compile: the ops compute in float16 / bfloat16 (kiln_quantize_fp16).
    void quantize_fp16(const std::vector<std::string>& ops = {"all"}) { quantize(kiln_quantize_fp16, ops); }
    void quantize_bf16(const std::vector<std::string>& ops = {"all"}) { quantize(kiln_quantize_bf16, ops); }
    // Before compile: int8 calibrated on the input sets (kiln_quantize_int8).
    void quantize_int8(const target& t, const std::vector<std::map<std::string, argument>>& calibration,
                       const std::vector<std::string>& ops = {"convolution", "dot"},
                       const std::string& method = "minmax", double percentile = 99.99,
                       const std::string& dump_scales = "") {
        calibrated(kiln_quantize_int8, t, calibration, ops, method, percentile, dump_scales);
    }
    // Before compile: float8 e4m3fn, calibrated as quantize_int8 (kiln_quantize_fp8).
    void quantize_fp8(const target& t, const std::vector<std::map<std::string, argument>>& calibration,
                      const std::vector<std::string>& ops = {"convolution", "dot"},
                      const std::string& method = "minmax", double percentile = 99.99,
                      const std::string& dump_scales = "") {
        calibrated(kiln_quantize_fp8, t, calibration, ops, method, percentile, dump_scales);
    }
    // Before compile: int4 weights for the matmuls (kiln_quantize_int4_weights).
    void quantize_int4_weights(std::size_t block_size = 32) { check(kiln_quantize_int4_weights(get(), block_size)); }

    std::vector<argument> run(const std::map<std::string, argument>& inputs) const {
        auto params = make_params(inputs);
        return take(detail::out<kiln_arguments>(kiln_program_run, get(), params.get()));
    }
    // Runs on a thread of Kiln's; the future gives the outputs or throws the run's error.
    std::future<std::vector<argument>> run_async(const std::map<std::string, argument>& inputs) const {
        auto params = make_params(inputs);
        auto promise = std::make_unique<std::promise<std::vector<argument>>>();
        auto future = promise->get_future();
        check(kiln_program_run_async(get(), params.get(), &on_async_result, promise.get()));
        promise.release();  // the callback owns it now
        return future;
    }
    // Writes output i into outputs[i] (e.g. argument::wrap of the caller's buffer).
    void run_into(const std::map<std::string, argument>& inputs, const std::vector<argument>& outputs) const {
        auto params = make_params(inputs);
        std::vector<kiln_argument> outs;
        for (auto& a : outputs) outs.push_back(a.get());
        check(kiln_program_run_into(get(), params.get(), outs.data(), outs.size()));
    }

    memory_usage get_memory_usage() const {
        memory_usage u;
        check(kiln_program_memory_usage(get(), &u.arena_bytes, &u.parameter_bytes, &u.literal_bytes, &u.output_bytes));
        return u;
    }
    std::string to_string() const { return detail::out<const char*>(kiln_program_to_string, get()); }
    void save(const std::string& path) const { check(kiln_save(get(), path.c_str())); }

private:
    template <class F>
    void calibrated(F f, const target& t, const std::vector<std::map<std::string, argument>>& calibration,
                    const std::vector<std::string>& ops, const std::string& method, double percentile,
                    const std::string& dump_scales) {
        std::vector<params> sets;
        std::vector<kiln_params> handles;
        for (const auto& inputs : calibration) {
            sets.push_back(make_params(inputs));
            handles.push_back(sets.back().get());
        }
        std::vector<const char*> names;
        for (const auto& n : ops) names.push_back(n.c_str());
        check(f(get(), t.get(), handles.data(), handles.size(), names.data(), names.size(), method.c_str(), percentile,
                dump_scales.empty() ? nullptr : dump_scales.c_str()));
    }
    template <class F>
    void quantize(F f, const std::vector<std::string>& ops) {
        std::vector<const char*> names;
        for (const auto& n : ops) names.push_back(n.c_str());
        check(f(get(), names.data(), names.size()));
    }
    static void on_async_result(void* user, kiln_status status, kiln_arguments outs) {
        std::unique_ptr<std::promise<std::vector<argument>>> promise(
            static_cast<std::promise<std::vector<argument>>*>(user));
        try {
            check(status);
            promise->set_value(take(outs));
        } catch (...) {
            promise->set_exception(std::current_exception());
        }
    }
    // The arguments of a run's outputs; destroys the list.
    static std::vector<argument> take(kiln_arguments outs) {
        detail::handle<kiln_arguments, kiln_arguments_destroy> hold(outs);
        std::vector<argument> result;
        for (std::size_t i = 0, n = detail::out<std::size_t>(kiln_arguments_size, outs); i < n; ++i)
            result.emplace_back(detail::out<kiln_argument>(kiln_arguments_get, outs, i));
        return result;
    }
    using params = detail::handle<kiln_params, kiln_params_destroy>;
    static params make_params(const std::map<std::string, argument>& inputs) {
        params p(detail::out<kiln_params>(kiln_params_create));
        for (auto& [name, a] : inputs) check(kiln_params_add(p.get(), name.c_str(), a.get()));
        return p;
    }
    std::vector<std::string> names(kiln_status (*count)(kiln_program, std::size_t*),
                                   kiln_status (*name)(kiln_program, std::size_t, const char**)) const {
        std::vector<std::string> v;
        for (std::size_t i = 0, n = detail::out<std::size_t>(count, get()); i < n; ++i)
            v.emplace_back(detail::out<const char*>(name, get(), i));
        return v;
    }
    detail::handle<kiln_program, kiln_program_destroy> h_;
};

inline program parse_onnx(const std::string& path, const onnx_options& o = onnx_options()) {
    return program(detail::out<kiln_program>(kiln_parse_onnx, path.c_str(), o.get()));
}
inline program parse_onnx_buffer(const void* data, std::size_t size, const onnx_options& o = onnx_options()) {
    return program(detail::out<kiln_program>(kiln_parse_onnx_buffer, data, size, o.get()));
}
// device_id: the device a compiled program is restored on (default: its own).
inline program load(const std::string& path, std::optional<int> device_id = std::nullopt) {
    detail::handle<kiln_file_options, kiln_file_options_destroy> o(
        detail::out<kiln_file_options>(kiln_file_options_create));
    if (device_id) check(kiln_file_options_set_device_id(o.get(), *device_id));
    return program(detail::out<kiln_program>(kiln_load, path.c_str(), o.get()));
}
inline void save(const program& p, const std::string& path) { p.save(path); }

}  // namespace kiln::api
