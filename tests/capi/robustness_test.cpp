// Every C function with null handles, handles of the wrong kind or not handles at all,
// and null pointers: each call must return KILN_STATUS_INVALID_ARGUMENT and leave a
// message naming the function, never crash. `every_function_is_called` keeps the
// robustness tests complete: each symbol of kiln_c.abi must appear in one of them.
#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "abi_list.hpp"
#include "robustness_fixture.hpp"

using namespace capi_test;

namespace {
// The callback of the runs that must not start.
void never_called(void*, kiln_status, kiln_arguments) { ADD_FAILURE() << "a refused run_async called back"; }

struct handle_call {
    const char* function;
    const char* kind;  // which handle the lambda's parameter stands for
    std::function<kiln_status(void*)> call;
};

}  // namespace

TEST_F(capi_robustness, bad_handles) {
    size_t n = 0, a = 0, b = 0, c = 0, d = 0;
    int i = 0;
    const char* s = nullptr;
    const size_t* p = nullptr;
    void* v = nullptr;
    float buf[6];
    kiln_type t{};
    kiln_shape_kind k{};
    kiln_shape sh = nullptr;
    kiln_argument ar = nullptr;
    kiln_arguments ars = nullptr;
    kiln_program pr = nullptr;
    size_t dims[] = {2, 3};
    auto kiln_path = (fs::path(::testing::TempDir()) / "capi_bad_handles.kiln").string();
    // A program being built (not compiled, so it takes additions), its module and a parameter.
    kiln_program bp = nullptr;
    kiln_module bm = nullptr, mo = nullptr;
    kiln_instruction bx = nullptr, in = nullptr;
    ASSERT_EQ(kiln_program_create(&bp), KILN_STATUS_SUCCESS);
    ASSERT_EQ(kiln_program_get_main_module(bp, &bm), KILN_STATUS_SUCCESS);
    ASSERT_EQ(kiln_module_add_parameter(bm, "bx", shape, &bx), KILN_STATUS_SUCCESS);
    // Every handle parameter of every function; the others are valid.
    std::vector<handle_call> calls = {
        {"kiln_onnx_options_destroy", "onnx", [&](void* h) { return kiln_onnx_options_destroy((kiln_onnx_options)h); }},
        {"kiln_onnx_options_set_default_dim_value", "onnx",
         [&](void* h) { return kiln_onnx_options_set_default_dim_value((kiln_onnx_options)h, 1); }},
        {"kiln_onnx_options_set_default_dyn_dim_value", "onnx",
         [&](void* h) { return kiln_onnx_options_set_default_dyn_dim_value((kiln_onnx_options)h, 1, 8, nullptr, 0); }},
        {"kiln_onnx_options_set_input_dims", "onnx",
         [&](void* h) { return kiln_onnx_options_set_input_dims((kiln_onnx_options)h, "x", dims, 2); }},
        {"kiln_onnx_options_set_dyn_input_dims", "onnx",
         [&](void* h) { return kiln_onnx_options_set_dyn_input_dims((kiln_onnx_options)h, "x", dims, dims, 2); }},
        {"kiln_onnx_options_set_dyn_input_dim_optimals", "onnx",
         [&](void* h) { return kiln_onnx_options_set_dyn_input_dim_optimals((kiln_onnx_options)h, "x", 0, dims, 1); }},
        {"kiln_onnx_options_set_dyn_input_dim_symbol", "onnx",
         [&](void* h) { return kiln_onnx_options_set_dyn_input_dim_symbol((kiln_onnx_options)h, "x", 0, "b"); }},
        {"kiln_onnx_options_set_skip_unknown_operators", "onnx",
         [&](void* h) { return kiln_onnx_options_set_skip_unknown_operators((kiln_onnx_options)h, 1); }},
        {"kiln_onnx_options_set_max_loop_iterations", "onnx",
         [&](void* h) { return kiln_onnx_options_set_max_loop_iterations((kiln_onnx_options)h, 3); }},
        {"kiln_onnx_options_set_limit_max_iterations", "onnx",
         [&](void* h) { return kiln_onnx_options_set_limit_max_iterations((kiln_onnx_options)h, 1); }},
        {"kiln_onnx_options_set_external_data_path", "onnx",
         [&](void* h) { return kiln_onnx_options_set_external_data_path((kiln_onnx_options)h, "."); }},
        {"kiln_compile_options_destroy", "copts",
         [&](void* h) { return kiln_compile_options_destroy((kiln_compile_options)h); }},
        {"kiln_compile_options_set_offload_copy", "copts",
         [&](void* h) { return kiln_compile_options_set_offload_copy((kiln_compile_options)h, 1); }},
        {"kiln_compile_options_set_device_id", "copts",
         [&](void* h) { return kiln_compile_options_set_device_id((kiln_compile_options)h, 0); }},
        {"kiln_compile_options_set_fast_math", "copts",
         [&](void* h) { return kiln_compile_options_set_fast_math((kiln_compile_options)h, 0); }},
        {"kiln_compile_options_set_tf32", "copts",
         [&](void* h) { return kiln_compile_options_set_tf32((kiln_compile_options)h, 0); }},
        {"kiln_compile_options_set_gpu_arch", "copts",
         [&](void* h) { return kiln_compile_options_set_gpu_arch((kiln_compile_options)h, "sm_90"); }},
        {"kiln_compile_options_set_exhaustive_tune", "copts",
         [&](void* h) { return kiln_compile_options_set_exhaustive_tune((kiln_compile_options)h, 0); }},
        {"kiln_compile_options_set_threads", "copts",
         [&](void* h) { return kiln_compile_options_set_threads((kiln_compile_options)h, 1); }},
        {"kiln_compile_options_set_max_specializations", "copts",
         [&](void* h) { return kiln_compile_options_set_max_specializations((kiln_compile_options)h, 1); }},
        {"kiln_compile_options_set_specialize_after", "copts",
         [&](void* h) { return kiln_compile_options_set_specialize_after((kiln_compile_options)h, 1); }},
        {"kiln_compile_options_add_dynamic_buckets", "copts",
         [&](void* h) { return kiln_compile_options_add_dynamic_buckets((kiln_compile_options)h, "batch", dims, 2); }},
        {"kiln_file_options_destroy", "fopts",
         [&](void* h) { return kiln_file_options_destroy((kiln_file_options)h); }},
        {"kiln_file_options_set_device_id", "fopts",
         [&](void* h) { return kiln_file_options_set_device_id((kiln_file_options)h, 0); }},
        {"kiln_target_destroy", "target", [&](void* h) { return kiln_target_destroy((kiln_target)h); }},
        {"kiln_target_name", "target", [&](void* h) { return kiln_target_name((kiln_target)h, &s); }},
        {"kiln_target_available", "target", [&](void* h) { return kiln_target_available((kiln_target)h, &i, &s); }},
        {"kiln_shape_destroy", "shape", [&](void* h) { return kiln_shape_destroy((kiln_shape)h); }},
        {"kiln_shape_kind_of", "shape", [&](void* h) { return kiln_shape_kind_of((kiln_shape)h, &k); }},
        {"kiln_shape_type", "shape", [&](void* h) { return kiln_shape_type((kiln_shape)h, &t); }},
        {"kiln_shape_lens", "shape", [&](void* h) { return kiln_shape_lens((kiln_shape)h, &p, &n); }},
        {"kiln_shape_strides", "shape", [&](void* h) { return kiln_shape_strides((kiln_shape)h, &p, &n); }},
        {"kiln_shape_is_dynamic", "shape", [&](void* h) { return kiln_shape_is_dynamic((kiln_shape)h, &i); }},
        {"kiln_shape_dyn_dim", "shape", [&](void* h) { return kiln_shape_dyn_dim((kiln_shape)h, 0, &a, &b); }},
        {"kiln_shape_dyn_dim_optimals", "shape",
         [&](void* h) { return kiln_shape_dyn_dim_optimals((kiln_shape)h, 0, &p, &n); }},
        {"kiln_shape_dyn_dim_symbol", "shape",
         [&](void* h) { return kiln_shape_dyn_dim_symbol((kiln_shape)h, 0, &s); }},
        {"kiln_shape_elements", "shape", [&](void* h) { return kiln_shape_elements((kiln_shape)h, &n); }},
        {"kiln_shape_bytes", "shape", [&](void* h) { return kiln_shape_bytes((kiln_shape)h, &n); }},
        {"kiln_shape_to_string", "shape", [&](void* h) { return kiln_shape_to_string((kiln_shape)h, &s); }},
        {"kiln_argument_create", "shape",
         [&](void* h) { return kiln_argument_create((kiln_shape)h, data, sizeof data, &ar); }},
        {"kiln_argument_wrap", "shape",
         [&](void* h) { return kiln_argument_wrap((kiln_shape)h, buf, sizeof buf, &ar); }},
        {"kiln_argument_destroy", "argument", [&](void* h) { return kiln_argument_destroy((kiln_argument)h); }},
        {"kiln_argument_shape", "argument", [&](void* h) { return kiln_argument_shape((kiln_argument)h, &sh); }},
        {"kiln_argument_data", "argument", [&](void* h) { return kiln_argument_data((kiln_argument)h, &v); }},
        {"kiln_argument_copy_to", "argument",
         [&](void* h) { return kiln_argument_copy_to((kiln_argument)h, buf, sizeof buf); }},
        {"kiln_argument_element_count", "argument",
         [&](void* h) { return kiln_argument_element_count((kiln_argument)h, &n); }},
        {"kiln_argument_element", "argument", [&](void* h) { return kiln_argument_element((kiln_argument)h, 0, &ar); }},
        {"kiln_argument_write_tensor_proto", "argument",
         [&](void* h) { return kiln_argument_write_tensor_proto((kiln_argument)h, "x", "unused.pb"); }},
        {"kiln_arguments_destroy", "arguments", [&](void* h) { return kiln_arguments_destroy((kiln_arguments)h); }},
        {"kiln_arguments_size", "arguments", [&](void* h) { return kiln_arguments_size((kiln_arguments)h, &n); }},
        {"kiln_arguments_get", "arguments", [&](void* h) { return kiln_arguments_get((kiln_arguments)h, 0, &ar); }},
        {"kiln_params_destroy", "params", [&](void* h) { return kiln_params_destroy((kiln_params)h); }},
        {"kiln_params_add", "params", [&](void* h) { return kiln_params_add((kiln_params)h, "x", arg); }},
        {"kiln_params_add", "argument", [&](void* h) { return kiln_params_add(params, "x", (kiln_argument)h); }},
        {"kiln_parse_onnx", "onnx",
         [&](void* h) { return kiln_parse_onnx((models_dir / "add_relu.onnx").c_str(), (kiln_onnx_options)h, &pr); }},
        {"kiln_parse_onnx_buffer", "onnx",
         [&](void* h) { return kiln_parse_onnx_buffer("x", 1, (kiln_onnx_options)h, &pr); }},
        {"kiln_program_destroy", "program", [&](void* h) { return kiln_program_destroy((kiln_program)h); }},
        {"kiln_program_input_count", "program", [&](void* h) { return kiln_program_input_count((kiln_program)h, &n); }},
        {"kiln_program_input_name", "program",
         [&](void* h) { return kiln_program_input_name((kiln_program)h, 0, &s); }},
        {"kiln_program_input_shape", "program",
         [&](void* h) { return kiln_program_input_shape((kiln_program)h, "x", &sh); }},
        {"kiln_program_output_count", "program",
         [&](void* h) { return kiln_program_output_count((kiln_program)h, &n); }},
        {"kiln_program_output_name", "program",
         [&](void* h) { return kiln_program_output_name((kiln_program)h, 0, &s); }},
        {"kiln_program_output_shape", "program",
         [&](void* h) { return kiln_program_output_shape((kiln_program)h, 0, &sh); }},
        {"kiln_program_compile", "program",
         [&](void* h) { return kiln_program_compile((kiln_program)h, target, copts); }},
        {"kiln_program_compile", "target",
         [&](void* h) { return kiln_program_compile(program, (kiln_target)h, copts); }},
        {"kiln_program_compile", "copts",
         [&](void* h) { return kiln_program_compile(program, target, (kiln_compile_options)h); }},
        {"kiln_program_is_compiled", "program", [&](void* h) { return kiln_program_is_compiled((kiln_program)h, &i); }},
        {"kiln_quantize_fp16", "program", [&](void* h) { return kiln_quantize_fp16((kiln_program)h, nullptr, 0); }},
        {"kiln_quantize_bf16", "program", [&](void* h) { return kiln_quantize_bf16((kiln_program)h, nullptr, 0); }},
        {"kiln_quantize_int8", "program",
         [&](void* h) { return kiln_quantize_int8((kiln_program)h, target, &params, 1, nullptr, 0, nullptr, 0, nullptr); }},
        {"kiln_quantize_int8", "target",
         [&](void* h) { return kiln_quantize_int8(program, (kiln_target)h, &params, 1, nullptr, 0, nullptr, 0, nullptr); }},
        {"kiln_quantize_int8", "params", [&](void* h) {
             kiln_params bad = (kiln_params)h;
             return kiln_quantize_int8(program, target, &bad, 1, nullptr, 0, nullptr, 0, nullptr);
         }},
        {"kiln_quantize_fp8", "program",
         [&](void* h) { return kiln_quantize_fp8((kiln_program)h, target, &params, 1, nullptr, 0, nullptr, 0, nullptr); }},
        {"kiln_quantize_fp8", "target",
         [&](void* h) { return kiln_quantize_fp8(program, (kiln_target)h, &params, 1, nullptr, 0, nullptr, 0, nullptr); }},
        {"kiln_quantize_fp8", "params", [&](void* h) {
             kiln_params bad = (kiln_params)h;
             return kiln_quantize_fp8(program, target, &bad, 1, nullptr, 0, nullptr, 0, nullptr);
         }},
        {"kiln_quantize_int4_weights", "program", [&](void* h) { return kiln_quantize_int4_weights((kiln_program)h, 32); }},
        {"kiln_program_run", "program", [&](void* h) { return kiln_program_run((kiln_program)h, params, &ars); }},
        {"kiln_program_run", "params", [&](void* h) { return kiln_program_run(program, (kiln_params)h, &ars); }},
        {"kiln_program_run_into", "program",
         [&](void* h) { return kiln_program_run_into((kiln_program)h, params, &arg, 1); }},
        {"kiln_program_run_into", "params",
         [&](void* h) { return kiln_program_run_into(program, (kiln_params)h, &arg, 1); }},
        {"kiln_program_run_into", "argument",
         [&](void* h) {
             kiln_argument o = (kiln_argument)h;
             return kiln_program_run_into(program, params, &o, 1);
         }},
        {"kiln_program_run_async", "program",
         [&](void* h) { return kiln_program_run_async((kiln_program)h, params, never_called, nullptr); }},
        {"kiln_program_run_async", "params",
         [&](void* h) { return kiln_program_run_async(program, (kiln_params)h, never_called, nullptr); }},
        {"kiln_program_memory_usage", "program",
         [&](void* h) { return kiln_program_memory_usage((kiln_program)h, &a, &b, &c, &d); }},
        {"kiln_program_to_string", "program", [&](void* h) { return kiln_program_to_string((kiln_program)h, &s); }},
        {"kiln_save", "program", [&](void* h) { return kiln_save((kiln_program)h, kiln_path.c_str()); }},
        {"kiln_load", "fopts", [&](void* h) { return kiln_load(kiln_path.c_str(), (kiln_file_options)h, &pr); }},
        {"kiln_program_get_main_module", "program",
         [&](void* h) { return kiln_program_get_main_module((kiln_program)h, &mo); }},
        {"kiln_module_add_parameter", "module",
         [&](void* h) { return kiln_module_add_parameter((kiln_module)h, "p", shape, &in); }},
        {"kiln_module_add_parameter", "shape",
         [&](void* h) { return kiln_module_add_parameter(bm, "p", (kiln_shape)h, &in); }},
        {"kiln_module_add_literal", "module", [&](void* h) { return kiln_module_add_literal((kiln_module)h, arg, &in); }},
        {"kiln_module_add_literal", "argument",
         [&](void* h) { return kiln_module_add_literal(bm, (kiln_argument)h, &in); }},
        {"kiln_module_add_instruction", "module",
         [&](void* h) { return kiln_module_add_instruction((kiln_module)h, "relu", nullptr, &bx, 1, &in); }},
        {"kiln_module_add_instruction", "instruction",
         [&](void* h) {
             kiln_instruction i = (kiln_instruction)h;
             return kiln_module_add_instruction(bm, "relu", nullptr, &i, 1, &in);
         }},
        {"kiln_module_add_return", "module", [&](void* h) { return kiln_module_add_return((kiln_module)h, &bx, 1); }},
        {"kiln_module_add_return", "instruction",
         [&](void* h) {
             kiln_instruction i = (kiln_instruction)h;
             return kiln_module_add_return(bm, &i, 1);
         }},
        {"kiln_module_to_string", "module", [&](void* h) { return kiln_module_to_string((kiln_module)h, &s); }},
        {"kiln_instruction_shape", "instruction",
         [&](void* h) { return kiln_instruction_shape((kiln_instruction)h, &sh); }},
    };
    // A block that looks like no live handle: a destroyed one's tag is cleared like this.
    alignas(16) unsigned char zeros[256] = {};
    for (auto& c : calls) {
        // Options parameters may be NULL (defaults); every other handle may not.
        bool optional =
            std::string(c.function) != "kiln_onnx_options_destroy" &&
            std::string(c.function).find("options_") == std::string::npos &&
            (std::string(c.kind) == "onnx" || std::string(c.kind) == "copts" || std::string(c.kind) == "fopts");
        if (!optional) expect_status(c.call(nullptr), KILN_STATUS_INVALID_ARGUMENT, c.function, "(NULL handle)");
        expect_status(c.call(wrong_kind(c.kind)), KILN_STATUS_INVALID_ARGUMENT, c.function, "(wrong kind)");
        expect_status(c.call(zeros), KILN_STATUS_INVALID_ARGUMENT, c.function, "(not a handle)");
    }
    // Nothing was handed out by the failing calls.
    EXPECT_EQ(sh, nullptr);
    EXPECT_EQ(ar, nullptr);
    EXPECT_EQ(ars, nullptr);
    EXPECT_EQ(pr, nullptr);
    EXPECT_EQ(mo, nullptr);
    EXPECT_EQ(in, nullptr);
    kiln_program_destroy(bp);
}

TEST_F(capi_robustness, null_pointers) {
    size_t n = 0, dims[] = {2, 3};
    int i = 0, maj = 0;
    const size_t* p = nullptr;
    kiln_argument o = nullptr;
    kiln_program bp = nullptr;
    kiln_module bm = nullptr;
    kiln_instruction bx = nullptr, bi = nullptr;
    ASSERT_EQ(kiln_program_create(&bp), KILN_STATUS_SUCCESS);
    ASSERT_EQ(kiln_program_get_main_module(bp, &bm), KILN_STATUS_SUCCESS);
    ASSERT_EQ(kiln_module_add_parameter(bm, "bx", shape, &bx), KILN_STATUS_SUCCESS);
    std::vector<std::pair<const char*, std::function<kiln_status()>>> calls = {
        {"kiln_version", [&] { return kiln_version(&maj, nullptr, &i); }},
        {"kiln_version_string", [&] { return kiln_version_string(nullptr); }},
        {"kiln_onnx_options_create", [&] { return kiln_onnx_options_create(nullptr); }},
        {"kiln_onnx_options_set_default_dyn_dim_value",
         [&] { return kiln_onnx_options_set_default_dyn_dim_value(onnx, 1, 8, nullptr, 2); }},
        {"kiln_onnx_options_set_input_dims", [&] { return kiln_onnx_options_set_input_dims(onnx, nullptr, dims, 2); }},
        {"kiln_onnx_options_set_input_dims", [&] { return kiln_onnx_options_set_input_dims(onnx, "x", nullptr, 2); }},
        {"kiln_onnx_options_set_dyn_input_dims",
         [&] { return kiln_onnx_options_set_dyn_input_dims(onnx, "x", dims, nullptr, 2); }},
        {"kiln_onnx_options_set_dyn_input_dim_optimals",
         [&] { return kiln_onnx_options_set_dyn_input_dim_optimals(onnx, nullptr, 0, dims, 1); }},
        {"kiln_onnx_options_set_external_data_path",
         [&] { return kiln_onnx_options_set_external_data_path(onnx, nullptr); }},
        {"kiln_onnx_options_set_dyn_input_dim_symbol",
         [&] { return kiln_onnx_options_set_dyn_input_dim_symbol(onnx, nullptr, 0, "b"); }},
        {"kiln_compile_options_create", [&] { return kiln_compile_options_create(nullptr); }},
        {"kiln_compile_options_add_dynamic_buckets",
         [&] { return kiln_compile_options_add_dynamic_buckets(copts, nullptr, dims, 2); }},
        {"kiln_compile_options_add_dynamic_buckets",
         [&] { return kiln_compile_options_add_dynamic_buckets(copts, "batch", nullptr, 2); }},
        {"kiln_file_options_create", [&] { return kiln_file_options_create(nullptr); }},
        {"kiln_target_count", [&] { return kiln_target_count(nullptr); }},
        {"kiln_target_name_at", [&] { return kiln_target_name_at(0, nullptr); }},
        {"kiln_target_get", [&] { return kiln_target_get(nullptr, nullptr); }},
        {"kiln_target_available", [&] { return kiln_target_available(target, &i, nullptr); }},
        {"kiln_shape_create", [&] { return kiln_shape_create(KILN_TYPE_FLOAT32, nullptr, 2, nullptr, nullptr); }},
        {"kiln_shape_lens", [&] { return kiln_shape_lens(shape, &p, nullptr); }},
        {"kiln_shape_strides", [&] { return kiln_shape_strides(shape, nullptr, &n); }},
        {"kiln_shape_to_string", [&] { return kiln_shape_to_string(shape, nullptr); }},
        {"kiln_argument_create", [&] { return kiln_argument_create(shape, data, sizeof data, nullptr); }},
        {"kiln_argument_wrap", [&] { return kiln_argument_wrap(shape, nullptr, sizeof data, &o); }},
        {"kiln_argument_data", [&] { return kiln_argument_data(arg, nullptr); }},
        {"kiln_argument_copy_to", [&] { return kiln_argument_copy_to(arg, nullptr, sizeof data); }},
        {"kiln_argument_read_tensor_proto", [&] { return kiln_argument_read_tensor_proto(nullptr, &o); }},
        {"kiln_argument_write_tensor_proto", [&] { return kiln_argument_write_tensor_proto(arg, nullptr, "x.pb"); }},
        {"kiln_argument_element_count", [&] { return kiln_argument_element_count(arg, nullptr); }},
        {"kiln_argument_element", [&] { return kiln_argument_element(arg, 0, nullptr); }},
        {"kiln_arguments_get", [&] { return kiln_arguments_get(outputs, 0, nullptr); }},
        {"kiln_params_create", [&] { return kiln_params_create(nullptr); }},
        {"kiln_params_add", [&] { return kiln_params_add(params, nullptr, arg); }},
        {"kiln_parse_onnx", [&] { return kiln_parse_onnx(nullptr, onnx, nullptr); }},
        {"kiln_parse_onnx_buffer", [&] { return kiln_parse_onnx_buffer(nullptr, 10, onnx, nullptr); }},
        {"kiln_program_input_name", [&] { return kiln_program_input_name(program, 0, nullptr); }},
        {"kiln_program_input_shape", [&] { return kiln_program_input_shape(program, nullptr, nullptr); }},
        {"kiln_program_run", [&] { return kiln_program_run(program, params, nullptr); }},
        {"kiln_program_run_into", [&] { return kiln_program_run_into(program, params, nullptr, 1); }},
        {"kiln_program_run_async", [&] { return kiln_program_run_async(program, params, nullptr, nullptr); }},
        {"kiln_program_memory_usage", [&] { return kiln_program_memory_usage(program, &n, &n, nullptr, &n); }},
        {"kiln_quantize_fp16", [&] { return kiln_quantize_fp16(program, nullptr, 1); }},
        {"kiln_quantize_bf16", [&] { return kiln_quantize_bf16(program, nullptr, 1); }},
        {"kiln_quantize_int8", [&] { return kiln_quantize_int8(program, target, nullptr, 1, nullptr, 0, nullptr, 0, nullptr); }},
        {"kiln_quantize_int8", [&] { return kiln_quantize_int8(program, target, &params, 1, nullptr, 1, nullptr, 0, nullptr); }},
        {"kiln_quantize_fp8", [&] { return kiln_quantize_fp8(program, target, nullptr, 1, nullptr, 0, nullptr, 0, nullptr); }},
        {"kiln_quantize_fp8", [&] { return kiln_quantize_fp8(program, target, &params, 1, nullptr, 1, nullptr, 0, nullptr); }},
        {"kiln_save", [&] { return kiln_save(program, nullptr); }},
        {"kiln_load", [&] { return kiln_load(nullptr, fopts, nullptr); }},
        {"kiln_program_create", [&] { return kiln_program_create(nullptr); }},
        {"kiln_program_get_main_module", [&] { return kiln_program_get_main_module(program, nullptr); }},
        {"kiln_module_add_parameter", [&] { return kiln_module_add_parameter(bm, nullptr, shape, &bi); }},
        {"kiln_module_add_parameter", [&] { return kiln_module_add_parameter(bm, "p", shape, nullptr); }},
        {"kiln_module_add_literal", [&] { return kiln_module_add_literal(bm, arg, nullptr); }},
        {"kiln_module_add_instruction", [&] { return kiln_module_add_instruction(bm, nullptr, nullptr, &bx, 1, &bi); }},
        {"kiln_module_add_instruction", [&] { return kiln_module_add_instruction(bm, "relu", nullptr, nullptr, 1, &bi); }},
        {"kiln_module_add_instruction", [&] { return kiln_module_add_instruction(bm, "relu", nullptr, &bx, 1, nullptr); }},
        {"kiln_module_add_return", [&] { return kiln_module_add_return(bm, nullptr, 1); }},
        {"kiln_module_to_string", [&] { return kiln_module_to_string(bm, nullptr); }},
        {"kiln_instruction_shape", [&] { return kiln_instruction_shape(bx, nullptr); }},
    };
    for (auto& [function, call] : calls)
        expect_status(call(), KILN_STATUS_INVALID_ARGUMENT, function, "(NULL pointer)");
    EXPECT_EQ(maj, 0) << "outputs are left untouched on failure";
    EXPECT_EQ(o, nullptr);
    EXPECT_EQ(bi, nullptr);
    kiln_program_destroy(bp);
}
TEST(capi_robustness_meta, every_function_is_called) {
    std::string tests;
    for (auto& e : fs::directory_iterator(source_dir / "tests" / "capi"))
        if (e.path().filename().string().rfind("robustness_", 0) == 0) tests += read_bytes(e.path());
    auto abi = kiln_test::read_abi_list();
    ASSERT_FALSE(abi.functions.empty());
    for (auto& [name, prototype] : abi.functions)
        EXPECT_NE(tests.find(name + "("), std::string::npos) << name << " is never called by the robustness tests";
}

TEST(capi_robustness_meta, status_names_and_version) {
    EXPECT_STREQ(kiln_status_name(KILN_STATUS_SUCCESS), "success");
    EXPECT_STREQ(kiln_status_name(KILN_STATUS_SHAPE), "shape error");
    EXPECT_STREQ(kiln_status_name(KILN_STATUS_INVALID_ARGUMENT), "invalid argument");
    EXPECT_STREQ(kiln_status_name(static_cast<kiln_status>(999)), "unknown status");
    EXPECT_STREQ(kiln_status_name(static_cast<kiln_status>(-1)), "unknown status");
    int major = -1, minor = -1, patch = -1;
    ASSERT_EQ(kiln_version(&major, &minor, &patch), KILN_STATUS_SUCCESS);
    const char* text = nullptr;
    ASSERT_EQ(kiln_version_string(&text), KILN_STATUS_SUCCESS);
    EXPECT_EQ(std::string(text), std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch));
}
