// kiln_quantize_fp16 / kiln_quantize_bf16 through the C API: the chosen ops become 16-bit,
// unknown op names are refused, and the result compiles.
#include <kiln/kiln.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

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
