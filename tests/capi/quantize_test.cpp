// kiln_quantize_fp16 / kiln_quantize_bf16 through the C API: the chosen ops become 16-bit,
// unknown op names are refused, and the result compiles.
#include <kiln/kiln.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

TEST(capi_quantize, bf16_convolutions_compile_and_unknown_ops_are_refused) {
    const fs::path model = fs::path(KILN_SHARED_DIR) / "models" / "fashion_resnet" / "model.onnx";
    if (!fs::exists(model)) GTEST_SKIP() << model << " is missing";
    kiln_program program = nullptr;
    ASSERT_EQ(kiln_parse_onnx(model.c_str(), nullptr, &program), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    const char* bad[] = {"convolutoin"};
    EXPECT_EQ(kiln_quantize_fp16(program, bad, 1), KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kiln_last_error_message()).find("convolutoin"), std::string::npos);
    const char* ops[] = {"convolution"};
    ASSERT_EQ(kiln_quantize_bf16(program, ops, 1), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    const char* text = nullptr;
    ASSERT_EQ(kiln_program_to_string(program, &text), KILN_STATUS_SUCCESS);
    EXPECT_NE(std::string(text).find("bfloat16"), std::string::npos);
    kiln_target ref = nullptr;
    ASSERT_EQ(kiln_target_get("ref", &ref), KILN_STATUS_SUCCESS);
    EXPECT_EQ(kiln_program_compile(program, ref, nullptr), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    kiln_target_destroy(ref);
    kiln_program_destroy(program);
}

TEST(capi_quantize, cpp_wrapper_fp16_all) {
    const fs::path model = fs::path(KILN_SHARED_DIR) / "models" / "fashion_resnet" / "model.onnx";
    if (!fs::exists(model)) GTEST_SKIP() << model << " is missing";
    auto p = kiln::api::parse_onnx(model.string());
    p.quantize_fp16();
    EXPECT_NE(p.to_string().find("float16"), std::string::npos);
    EXPECT_THROW(p.quantize_bf16({"nope"}), kiln::api::error);
}

// kiln_quantize_int8: calibrated on two of fashion_resnet's calibration sets, the convolutions
// and the gemm read quantize_linear/dequantize_linear pairs, the program compiles and runs;
// bad methods and empty calibration are refused.
TEST(capi_quantize, int8_with_calibration_sets) {
    const fs::path dir = fs::path(KILN_SHARED_DIR) / "models" / "fashion_resnet";
    if (!fs::exists(dir / "calibration")) GTEST_SKIP() << dir << " has no calibration folder";
    kiln_onnx_options onnx = nullptr;
    ASSERT_EQ(kiln_onnx_options_create(&onnx), KILN_STATUS_SUCCESS);
    const size_t dims[] = {16, 1, 28, 28};
    ASSERT_EQ(kiln_onnx_options_set_input_dims(onnx, "input", dims, 4), KILN_STATUS_SUCCESS);
    kiln_program program = nullptr;
    ASSERT_EQ(kiln_parse_onnx((dir / "model.onnx").c_str(), onnx, &program), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    kiln_target ref = nullptr;
    ASSERT_EQ(kiln_target_get("ref", &ref), KILN_STATUS_SUCCESS);
    std::vector<kiln_params> sets;
    std::vector<kiln_argument> args;
    for (int k = 0; k < 2; ++k) {
        kiln_argument a = nullptr;
        auto file = dir / "calibration" / ("data_set_" + std::to_string(k)) / "input_0.pb";
        ASSERT_EQ(kiln_argument_read_tensor_proto(file.c_str(), &a), KILN_STATUS_SUCCESS) << kiln_last_error_message();
        kiln_params p = nullptr;
        ASSERT_EQ(kiln_params_create(&p), KILN_STATUS_SUCCESS);
        ASSERT_EQ(kiln_params_add(p, "input", a), KILN_STATUS_SUCCESS);
        sets.push_back(p);
        args.push_back(a);
    }
    EXPECT_EQ(kiln_quantize_int8(program, ref, sets.data(), 0, nullptr, 0, nullptr, 0, nullptr),
              KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(kiln_quantize_int8(program, ref, sets.data(), sets.size(), nullptr, 0, "kl", 0, nullptr),
              KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kiln_last_error_message()).find("calibration method"), std::string::npos);
    ASSERT_EQ(kiln_quantize_int8(program, ref, sets.data(), sets.size(), nullptr, 0, "entropy", 0, nullptr),
              KILN_STATUS_SUCCESS)
        << kiln_last_error_message();
    const char* text = nullptr;
    ASSERT_EQ(kiln_program_to_string(program, &text), KILN_STATUS_SUCCESS);
    EXPECT_NE(std::string(text).find("quantize_linear"), std::string::npos);
    ASSERT_EQ(kiln_program_compile(program, ref, nullptr), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    kiln_arguments outs = nullptr;
    EXPECT_EQ(kiln_program_run(program, sets[0], &outs), KILN_STATUS_SUCCESS) << kiln_last_error_message();
    kiln_arguments_destroy(outs);
    for (auto p : sets) kiln_params_destroy(p);
    for (auto a : args) kiln_argument_destroy(a);
    kiln_target_destroy(ref);
    kiln_program_destroy(program);
    kiln_onnx_options_destroy(onnx);
}

TEST(capi_quantize, cpp_wrapper_int8) {
    const fs::path dir = fs::path(KILN_SHARED_DIR) / "models" / "fashion_resnet";
    if (!fs::exists(dir / "calibration")) GTEST_SKIP() << dir << " has no calibration folder";
    auto p = kiln::api::parse_onnx((dir / "model.onnx").string());
    auto x = kiln::api::argument::read_tensor_proto((dir / "calibration" / "data_set_0" / "input_0.pb").string());
    p.quantize_int8(kiln::api::target("ref"), {{{"input", x}}}, {"convolution"});
    EXPECT_NE(p.to_string().find("quantize_linear"), std::string::npos);
    EXPECT_THROW(p.quantize_int8(kiln::api::target("ref"), {{{"input", x}}}), kiln::api::error);  // already int8
}

// kiln_quantize_fp8 and kiln_quantize_int4_weights through the C++ wrapper (the C functions
// underneath): fp8 Q/DQ pairs, fashion_resnet's Gemm as matmul_int4, both compile on the cpu
// target and run; a second quantization and empty calibration are refused.
TEST(capi_quantize, cpp_wrapper_fp8_and_int4_weights) {
    const fs::path dir = fs::path(KILN_SHARED_DIR) / "models" / "fashion_resnet";
    if (!fs::exists(dir / "calibration")) GTEST_SKIP() << dir << " has no calibration folder";
    auto x = kiln::api::argument::read_tensor_proto((dir / "calibration" / "data_set_0" / "input_0.pb").string());
    auto p = kiln::api::parse_onnx((dir / "model.onnx").string());
    EXPECT_THROW(p.quantize_fp8(kiln::api::target("cpu"), {}), kiln::api::error);
    p.quantize_fp8(kiln::api::target("cpu"), {{{"input", x}}});
    EXPECT_NE(p.to_string().find("float8e4m3fn"), std::string::npos);
    EXPECT_THROW(p.quantize_int4_weights(), kiln::api::error);  // already fp8
    p.compile(kiln::api::target("cpu"));
    EXPECT_EQ(p.run({{"input", x}}).size(), 1u);

    auto q = kiln::api::parse_onnx((dir / "model.onnx").string());
    EXPECT_EQ(kiln_quantize_int4_weights(nullptr, 32), KILN_STATUS_INVALID_ARGUMENT);
    q.quantize_int4_weights(16);
    EXPECT_NE(q.to_string().find("matmul_int4"), std::string::npos);
    q.compile(kiln::api::target("cpu"));
    EXPECT_EQ(q.run({{"input", x}}).size(), 1u);
}
