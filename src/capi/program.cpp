// kiln_params, kiln_target, kiln_program, parse, run, save and load.
#include "handles.hpp"

#include <kiln/quantization.hpp>

#include <thread>

using namespace kiln::capi;
using kiln::error_code;
using kiln::throw_error;

namespace kiln::capi {

kiln_program new_program(kiln::program p) {
    auto h = std::make_unique<kiln_program_t>();
    h->program = std::make_shared<kiln::program>(std::move(p));
    h->inputs = h->program->get_parameter_names();
    h->outputs = h->program->get_output_names();
    return h.release();
}

}  // namespace kiln::capi

namespace {

// Target names are registered by static initializers before any C call can run.
const std::vector<std::string>& target_names() {
    static const std::vector<std::string> names = kiln::get_target_names();
    return names;
}

const std::string& name_at(const std::vector<std::string>& names, size_t index, const char* what) {
    if (index >= names.size())
        invalid("index " + std::to_string(index) + " of " + std::to_string(names.size()) + " " + what);
    return names[index];
}

const kiln::onnx_options& onnx_options_or_default(kiln_onnx_options options) {
    static const kiln::onnx_options defaults;
    return options ? get(options, "options").options : defaults;
}

}  // namespace

extern "C" {

kiln_status kiln_params_create(kiln_params* out) {
    return guarded(__func__, [&] {
        need(out, "out");
        *out = new kiln_params_t;
    });
}

kiln_status kiln_params_destroy(kiln_params params) {
    return guarded(__func__, [&] { destroy(params, "params"); });
}

kiln_status kiln_params_add(kiln_params params, const char* name, kiln_argument argument) {
    return guarded(__func__, [&] {
        auto& p = get(params, "params");
        auto& a = get(argument, "argument");
        p.map[need(name, "name")] = a.argument;
    });
}

kiln_status kiln_target_count(size_t* count) {
    return guarded(__func__, [&] { *need(count, "count") = target_names().size(); });
}

kiln_status kiln_target_name_at(size_t index, const char** name) {
    return guarded(__func__, [&] {
        need(name, "name");
        *name = name_at(target_names(), index, "targets").c_str();
    });
}

kiln_status kiln_target_get(const char* name, kiln_target* out) {
    return guarded(__func__, [&] {
        need(name, "name"), need(out, "out");
        auto h = std::make_unique<kiln_target_t>();
        h->target = kiln::get_target(name);  // names the known targets when unknown
        h->name = h->target->name();
        h->reason = h->target->unavailable_reason();
        *out = h.release();
    });
}

kiln_status kiln_target_destroy(kiln_target target) {
    return guarded(__func__, [&] { destroy(target, "target"); });
}

kiln_status kiln_target_name(kiln_target target, const char** name) {
    return guarded(__func__, [&] {
        auto& t = get(target, "target");
        *need(name, "name") = t.name.c_str();
    });
}

kiln_status kiln_target_available(kiln_target target, int* available, const char** reason) {
    return guarded(__func__, [&] {
        auto& t = get(target, "target");
        need(available, "available"), need(reason, "reason");
        *available = t.reason.empty() ? 1 : 0, *reason = t.reason.c_str();
    });
}

kiln_status kiln_parse_onnx(const char* path, kiln_onnx_options options, kiln_program* out) {
    return guarded(__func__, [&] {
        need(path, "path"), need(out, "out");
        *out = new_program(kiln::parse_onnx(path, onnx_options_or_default(options)));
    });
}

kiln_status kiln_parse_onnx_buffer(const void* data, size_t size, kiln_onnx_options options, kiln_program* out) {
    return guarded(__func__, [&] {
        need(data, "data"), need(out, "out");
        *out = new_program(kiln::parse_onnx_buffer(data, size, onnx_options_or_default(options)));
    });
}

kiln_status kiln_program_destroy(kiln_program program) {
    return guarded(__func__, [&] { destroy(program, "program"); });
}

kiln_status kiln_program_input_count(kiln_program program, size_t* count) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        *need(count, "count") = p.inputs.size();
    });
}

kiln_status kiln_program_input_name(kiln_program program, size_t index, const char** name) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        need(name, "name");
        *name = name_at(p.inputs, index, "inputs").c_str();
    });
}

kiln_status kiln_program_input_shape(kiln_program program, const char* name, kiln_shape* out) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        need(name, "name"), need(out, "out");
        auto shapes = p.program->get_parameter_shapes();
        auto it = shapes.find(name);
        if (it == shapes.end() || name[0] == '#') {
            std::string known;
            for (auto& n : p.inputs) known += (known.empty() ? "" : ", ") + n;
            invalid(std::string("no input '") + name + "'; the inputs are: " + known);
        }
        *out = new_shape(it->second);
    });
}

kiln_status kiln_program_output_count(kiln_program program, size_t* count) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        *need(count, "count") = p.outputs.size();
    });
}

kiln_status kiln_program_output_name(kiln_program program, size_t index, const char** name) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        need(name, "name");
        *name = name_at(p.outputs, index, "outputs").c_str();
    });
}

kiln_status kiln_program_output_shape(kiln_program program, size_t index, kiln_shape* out) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        need(out, "out");
        auto shapes = p.program->get_output_shapes();
        if (index >= shapes.size())
            invalid("index " + std::to_string(index) + " of " + std::to_string(shapes.size()) + " outputs");
        *out = new_shape(shapes[index]);
    });
}

kiln_status kiln_program_compile(kiln_program program, kiln_target target, kiln_compile_options options) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        auto& t = get(target, "target");
        kiln::compile_options defaults;
        p.program->compile(*t.target, options ? get(options, "options").options : defaults);
    });
}

namespace {
kiln_status quantize_to(const char* func, kiln_program program, const char* const* ops, size_t op_count, kiln::type t) {
    return guarded(func, [&] {
        auto& p = get(program, "program");
        std::vector<std::string> names;
        for (size_t i = 0; i < op_count; ++i) names.emplace_back(need(need(ops, "ops")[i], "ops[i]"));
        if (names.empty()) names.emplace_back("all");
        kiln::quantize_float(*p.program, t, names);
    });
}
}  // namespace

kiln_status kiln_quantize_fp16(kiln_program program, const char* const* ops, size_t op_count) {
    return quantize_to(__func__, program, ops, op_count, kiln::type::float16);
}

kiln_status kiln_quantize_bf16(kiln_program program, const char* const* ops, size_t op_count) {
    return quantize_to(__func__, program, ops, op_count, kiln::type::bfloat16);
}

namespace {
kiln_status quantize_calibrated(const char* func, kiln_program program, kiln_target target, const kiln_params* calibration,
                                size_t calibration_count, const char* const* ops, size_t op_count, const char* method,
                                double percentile, const char* dump_scales, bool fp8) {
    return guarded(func, [&] {
        auto& p = get(program, "program");
        auto& t = get(target, "target");
        std::vector<kiln::param_map> sets;
        for (size_t i = 0; i < calibration_count; ++i)
            sets.push_back(get(need(calibration, "calibration")[i], "calibration[i]").map);
        kiln::int8_options o;
        if (op_count > 0) {
            o.ops.clear();
            for (size_t i = 0; i < op_count; ++i) o.ops.emplace_back(need(need(ops, "ops")[i], "ops[i]"));
        }
        if (method) o.method = kiln::calibration_method_from_name(method);
        if (percentile > 0) o.percentile = percentile;
        if (dump_scales) o.dump_scales = dump_scales;
        if (fp8) kiln::quantize_fp8(*p.program, *t.target, sets, o);
        else kiln::quantize_int8(*p.program, *t.target, sets, o);
    });
}
}  // namespace

kiln_status kiln_quantize_int8(kiln_program program, kiln_target target, const kiln_params* calibration,
                               size_t calibration_count, const char* const* ops, size_t op_count, const char* method,
                               double percentile, const char* dump_scales) {
    return quantize_calibrated(__func__, program, target, calibration, calibration_count, ops, op_count, method,
                               percentile, dump_scales, false);
}

kiln_status kiln_quantize_fp8(kiln_program program, kiln_target target, const kiln_params* calibration,
                              size_t calibration_count, const char* const* ops, size_t op_count, const char* method,
                              double percentile, const char* dump_scales) {
    return quantize_calibrated(__func__, program, target, calibration, calibration_count, ops, op_count, method,
                               percentile, dump_scales, true);
}

kiln_status kiln_quantize_int4_weights(kiln_program program, size_t block_size) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        kiln::quantize_int4_weights(*p.program, block_size == 0 ? 32 : block_size);
    });
}

kiln_status kiln_program_is_compiled(kiln_program program, int* compiled) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        *need(compiled, "compiled") = p.program->is_compiled() ? 1 : 0;
    });
}

kiln_status kiln_program_run(kiln_program program, kiln_params params, kiln_arguments* outputs) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        auto& in = get(params, "params");
        need(outputs, "outputs");
        auto h = std::make_unique<kiln_arguments_t>();
        h->items = p.program->eval(in.map);
        *outputs = h.release();
    });
}

kiln_status kiln_program_run_into(kiln_program program, kiln_params params, const kiln_argument* outputs,
                                  size_t count) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        auto& in = get(params, "params");
        if (count > 0) need(outputs, "outputs");
        if (count != p.outputs.size())
            invalid(std::to_string(count) + " output arguments given, the program has " +
                    std::to_string(p.outputs.size()) + " outputs");
        std::vector<kiln::argument> dest;
        for (size_t i = 0; i < count; ++i) dest.push_back(get(outputs[i], "outputs[i]").argument);
        // Checked before running: a wrong buffer should not cost a run.
        for (size_t i = 0; i < count; ++i)
            if (!dest[i].get_shape().is_tensor() || dest[i].data() == nullptr)
                invalid("outputs[" + std::to_string(i) + "] holds no tensor memory");
        // Computed straight into the buffers where the program allows it, else copied there.
        p.program->eval_into(in.map, dest);
    });
}

kiln_status kiln_program_run_async(kiln_program program, kiln_params params, kiln_run_callback callback,
                                   void* user_data) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        auto& in = get(params, "params");
        need(callback, "callback");
        // Copies: the caller may destroy its handles as soon as this returns.
        std::thread([prog = p.program, inputs = in.map, callback, user_data] {
            kiln_arguments outputs = nullptr;
            auto status = guarded("kiln_program_run_async", [&] {
                auto h = std::make_unique<kiln_arguments_t>();
                h->items = prog->eval(inputs);
                outputs = h.release();
            });
            callback(user_data, status, outputs);
        }).detach();
    });
}

kiln_status kiln_program_memory_usage(kiln_program program, size_t* arena_bytes, size_t* parameter_bytes,
                                      size_t* literal_bytes, size_t* output_bytes) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        need(arena_bytes, "arena_bytes"), need(parameter_bytes, "parameter_bytes");
        need(literal_bytes, "literal_bytes"), need(output_bytes, "output_bytes");
        auto u = p.program->get_memory_usage();
        *arena_bytes = u.arena_bytes, *parameter_bytes = u.parameter_bytes;
        *literal_bytes = u.literal_bytes, *output_bytes = u.output_bytes;
    });
}

kiln_status kiln_program_to_string(kiln_program program, const char** text) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        need(text, "text");
        std::lock_guard lock(p.text_mutex);
        p.text = p.program->to_string();
        *text = p.text.c_str();
    });
}

kiln_status kiln_save(kiln_program program, const char* path) {
    return guarded(__func__, [&] {
        auto& p = get(program, "program");
        kiln::save(*p.program, need(path, "path"));
    });
}

kiln_status kiln_load(const char* path, kiln_file_options options, kiln_program* out) {
    return guarded(__func__, [&] {
        need(path, "path"), need(out, "out");
        kiln::load_options defaults;
        *out = new_program(kiln::load(path, options ? get(options, "options").options : defaults));
    });
}

}  // extern "C"
