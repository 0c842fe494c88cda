// The fixture of the robustness tests (robustness_*_test.cpp): valid handles of every
// kind, and the check that a call failed with the expected status and a message naming it.
#pragma once
#include <kiln/kiln.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace capi_test {

namespace fs = std::filesystem;

inline const fs::path source_dir = KILN_SOURCE_DIR;
inline const fs::path models_dir = source_dir / "tests" / "data" / "models";

// The call failed with `want` and left a message naming `function`.
inline void expect_status(kiln_status got, kiln_status want, const std::string& function,
                          const std::string& what = "") {
    EXPECT_EQ(got, want) << function << " " << what << ": " << kiln_status_name(got) << ": "
                         << kiln_last_error_message();
    if (got == KILN_STATUS_SUCCESS) return;
    std::string msg = kiln_last_error_message();
    EXPECT_NE(msg.find(function), std::string::npos) << function << " " << what << ": message '" << msg << "'";
    EXPECT_NE(msg.find(kiln_status_name(got)), std::string::npos) << "message without its code name: " << msg;
}

inline std::string read_bytes(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// Valid handles of every kind, on add_relu.onnx (z = relu(x + y), float32[2, 3]).
class capi_robustness : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_EQ(kiln_onnx_options_create(&onnx), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_compile_options_create(&copts), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_file_options_create(&fopts), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_target_get("ref", &target), KILN_STATUS_SUCCESS) << kiln_last_error_message();
        size_t lens[] = {2, 3};
        ASSERT_EQ(kiln_shape_create(KILN_TYPE_FLOAT32, lens, 2, nullptr, &shape), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_argument_create(shape, data, sizeof data, &arg), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_params_create(&params), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_params_add(params, "x", arg), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_params_add(params, "y", arg), KILN_STATUS_SUCCESS);
        auto path = (models_dir / "add_relu.onnx").string();
        ASSERT_EQ(kiln_parse_onnx(path.c_str(), nullptr, &program), KILN_STATUS_SUCCESS) << kiln_last_error_message();
        ASSERT_EQ(kiln_program_compile(program, target, copts), KILN_STATUS_SUCCESS) << kiln_last_error_message();
        ASSERT_EQ(kiln_program_run(program, params, &outputs), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    }
    void TearDown() override {
        if (outputs) kiln_arguments_destroy(outputs);
        if (program) kiln_program_destroy(program);
        if (params) kiln_params_destroy(params);
        if (arg) kiln_argument_destroy(arg);
        if (shape) kiln_shape_destroy(shape);
        if (target) kiln_target_destroy(target);
        if (fopts) kiln_file_options_destroy(fopts);
        if (copts) kiln_compile_options_destroy(copts);
        if (onnx) kiln_onnx_options_destroy(onnx);
    }
    // A handle of a kind other than `kind`.
    void* wrong_kind(const std::string& kind) const {
        return kind == "params" ? static_cast<void*>(shape) : static_cast<void*>(params);
    }

    float data[6] = {1, -2, 3, -4, 5, -6};
    kiln_onnx_options onnx = nullptr;
    kiln_compile_options copts = nullptr;
    kiln_file_options fopts = nullptr;
    kiln_target target = nullptr;
    kiln_shape shape = nullptr;
    kiln_argument arg = nullptr;
    kiln_params params = nullptr;
    kiln_program program = nullptr;
    kiln_arguments outputs = nullptr;
};

}  // namespace capi_test
