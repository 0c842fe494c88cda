// The C functions with bad values, wrong byte counts and wrong inputs: the documented
// status, and a message naming the function and, for inputs, the input.
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

TEST_F(capi_robustness, bad_values_and_sizes) {
    size_t dims[] = {2, 3}, bad_lens[] = {2, 2}, opt[] = {9};
    kiln_argument o = nullptr;
    kiln_target tg = nullptr;
    kiln_shape sh = nullptr;
    kiln_arguments ars = nullptr;
    const char* s = nullptr;
    size_t a = 0, b = 0;
    float buf[6] = {};
    expect_status(kiln_onnx_options_set_default_dyn_dim_value(onnx, 8, 1, nullptr, 0), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_onnx_options_set_default_dyn_dim_value", "(min > max)");
    expect_status(kiln_onnx_options_set_default_dyn_dim_value(onnx, 1, 8, opt, 1), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_onnx_options_set_default_dyn_dim_value", "(optimal out of range)");
    expect_status(kiln_onnx_options_set_dyn_input_dim_optimals(onnx, "nope", 0, opt, 1), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_onnx_options_set_dyn_input_dim_optimals", "(no dims set)");
    ASSERT_EQ(kiln_onnx_options_set_dyn_input_dims(onnx, "x", dims, dims, 2), KILN_STATUS_SUCCESS);
    expect_status(kiln_onnx_options_set_dyn_input_dim_optimals(onnx, "x", 2, opt, 1), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_onnx_options_set_dyn_input_dim_optimals", "(dim out of range)");
    expect_status(kiln_compile_options_set_device_id(copts, -1), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_compile_options_set_device_id");
    expect_status(kiln_file_options_set_device_id(fopts, -3), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_file_options_set_device_id");
    expect_status(kiln_compile_options_add_dynamic_buckets(copts, "batch", dims, 0), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_compile_options_add_dynamic_buckets", "(no sizes)");
    expect_status(kiln_target_get("no-such-target", &tg), KILN_STATUS_INVALID_ARGUMENT, "kiln_target_get");
    size_t count = 0;
    ASSERT_EQ(kiln_target_count(&count), KILN_STATUS_SUCCESS);
    expect_status(kiln_target_name_at(count, &s), KILN_STATUS_INVALID_ARGUMENT, "kiln_target_name_at");
    expect_status(kiln_shape_create(static_cast<kiln_type>(999), dims, 2, nullptr, &sh), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_shape_create", "(bad type)");
    expect_status(kiln_shape_dyn_dim(shape, 2, &a, &b), KILN_STATUS_INVALID_ARGUMENT, "kiln_shape_dyn_dim");
    expect_status(kiln_shape_dyn_dim_symbol(shape, 7, &s), KILN_STATUS_INVALID_ARGUMENT, "kiln_shape_dyn_dim_symbol");
    // Wrong byte counts, one off either way.
    for (size_t size : {sizeof data - 1, sizeof data + 1, size_t(0)}) {
        expect_status(kiln_argument_create(shape, data, size, &o), KILN_STATUS_INVALID_ARGUMENT,
                      "kiln_argument_create");
        expect_status(kiln_argument_wrap(shape, buf, size, &o), KILN_STATUS_INVALID_ARGUMENT, "kiln_argument_wrap");
        expect_status(kiln_argument_copy_to(arg, buf, size), KILN_STATUS_INVALID_ARGUMENT, "kiln_argument_copy_to");
    }
    expect_status(kiln_arguments_get(outputs, 1, &o), KILN_STATUS_INVALID_ARGUMENT, "kiln_arguments_get");
    expect_status(kiln_program_input_name(program, 2, &s), KILN_STATUS_INVALID_ARGUMENT, "kiln_program_input_name");
    expect_status(kiln_program_output_name(program, 1, &s), KILN_STATUS_INVALID_ARGUMENT, "kiln_program_output_name");
    expect_status(kiln_program_output_shape(program, 1, &sh), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_program_output_shape");
    expect_status(kiln_program_input_shape(program, "nope", &sh), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_program_input_shape");
    EXPECT_NE(std::string(kiln_last_error_message()).find("x, y"), std::string::npos) << kiln_last_error_message();
    expect_status(kiln_program_compile(program, target, nullptr), KILN_STATUS_INVALID_ARGUMENT, "kiln_program_compile",
                  "(compiled twice)");

    // Run: wrong inputs. Each names the input.
    auto run_with = [&](const char* name, kiln_argument value) {
        kiln_params p = nullptr;
        EXPECT_EQ(kiln_params_create(&p), KILN_STATUS_SUCCESS);
        kiln_params_add(p, "x", arg);
        kiln_params_add(p, name, value);
        auto st = kiln_program_run(program, p, &ars);
        kiln_params_destroy(p);
        return st;
    };
    kiln_shape small = nullptr, ints = nullptr;
    int32_t int_data[6] = {};
    ASSERT_EQ(kiln_shape_create(KILN_TYPE_FLOAT32, bad_lens, 2, nullptr, &small), KILN_STATUS_SUCCESS);
    ASSERT_EQ(kiln_shape_create(KILN_TYPE_INT32, dims, 2, nullptr, &ints), KILN_STATUS_SUCCESS);
    kiln_argument small_arg = nullptr, int_arg = nullptr;
    ASSERT_EQ(kiln_argument_wrap(small, buf, 4 * sizeof(float), &small_arg), KILN_STATUS_SUCCESS);
    ASSERT_EQ(kiln_argument_wrap(ints, int_data, sizeof int_data, &int_arg), KILN_STATUS_SUCCESS);
    expect_status(run_with("y", small_arg), KILN_STATUS_SHAPE, "kiln_program_run", "(wrong lens)");
    EXPECT_NE(std::string(kiln_last_error_message()).find("'y'"), std::string::npos) << kiln_last_error_message();
    expect_status(run_with("y", int_arg), KILN_STATUS_TYPE, "kiln_program_run", "(wrong type)");
    expect_status(run_with("unknown", arg), KILN_STATUS_INVALID_ARGUMENT, "kiln_program_run", "(missing y, unknown)");
    // Run into caller buffers of the wrong count, lens and type.
    expect_status(kiln_program_run_into(program, params, &arg, 0), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_program_run_into");
    kiln_argument two[] = {arg, arg};
    expect_status(kiln_program_run_into(program, params, two, 2), KILN_STATUS_INVALID_ARGUMENT,
                  "kiln_program_run_into");
    expect_status(kiln_program_run_into(program, params, &small_arg, 1), KILN_STATUS_SHAPE, "kiln_program_run_into");
    expect_status(kiln_program_run_into(program, params, &int_arg, 1), KILN_STATUS_TYPE, "kiln_program_run_into");
    kiln_argument_destroy(small_arg), kiln_argument_destroy(int_arg);
    kiln_shape_destroy(small), kiln_shape_destroy(ints);
    EXPECT_EQ(o, nullptr);
    EXPECT_EQ(tg, nullptr);
    EXPECT_EQ(sh, nullptr);
    EXPECT_EQ(ars, nullptr);
}
