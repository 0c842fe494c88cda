// quantize_fp16 / quantize_bf16 on real models against ONNX Runtime's float32 outputs
// (../shared/models, test_data_set_0): the rel. L2 bounds of issue 20. On the target
// KILN_MODEL_TEST_TARGET names (ref by default: there the ops really compute in 16 bits).
#include "targets/cpu/cpu_features.hpp"

#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>

#include "shared_models.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const fs::path models_dir = fs::path(KILN_SHARED_DIR) / "models";

using test::target_under_test;

double rel_l2(const argument& got, const argument& want) {
    auto g = got.to_vector<double>();
    auto w = want.to_vector<double>();
    double num = 0, den = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
        num += (g[i] - w[i]) * (g[i] - w[i]);
        den += w[i] * w[i];
    }
    return std::sqrt(num / den);
}

// The model with its dims fixed to those of test_data_set_0 (a static program), and those inputs.
program parse_static(const fs::path& dir, param_map& inputs) {
    const auto names = parse_onnx((dir / "model.onnx").string()).get_parameter_names();
    onnx_options opts;
    for (std::size_t i = 0; i < names.size(); ++i) {
        auto file = dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb");
        inputs[names[i]] = read_tensor_proto(file.string());
        opts.map_input_dims[names[i]] = inputs[names[i]].get_shape().lens();
    }
    return parse_onnx((dir / "model.onnx").string(), opts);
}

struct quantize_case {
    std::string model;
    type reduced;
    double bound;  // rel. L2 against float32
};

class quantize_model : public testing::TestWithParam<quantize_case> {};

TEST_P(quantize_model, within_the_rel_l2_bound_of_float32) {
    const auto& c = GetParam();
    auto dir = models_dir / c.model;
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
    auto set = dir / "test_data_set_0";
    param_map inputs;
    auto p = parse_static(dir, inputs);
    quantize_float(p, c.reduced);
    // Saved and loaded before compile: the quantized program is a program like any other.
    auto bytes = save_buffer(p);
    p = load_buffer(bytes.data(), bytes.size());
    p.compile(*get_target(target_under_test()));
    const auto out = p.eval(inputs);
    const auto want = read_tensor_proto((set / "output_0.pb").string());
    ASSERT_EQ(out.at(0).get_shape().get_type(), type::float32);
    const double err = rel_l2(out.at(0), want);
    std::cout << c.model << " " << type_name(c.reduced) << " on " << target_under_test() << ": rel. L2 " << err << "\n";
    EXPECT_LE(err, c.bound);
    EXPECT_GT(err, 0.0);  // it did change something
}

std::string case_name(const testing::TestParamInfo<quantize_case>& i) {
    return i.param.model + "_" + std::string(type_name(i.param.reduced));
}

INSTANTIATE_TEST_SUITE_P(models, quantize_model,
                         testing::Values(quantize_case{"bert_small", type::bfloat16, 0.003},
                                         quantize_case{"bert_small", type::float16, 0.001},
                                         quantize_case{"mobilenet_v2", type::bfloat16, 0.17},
                                         quantize_case{"mobilenet_v2", type::float16, 0.04},
                                         quantize_case{"fashion_resnet", type::bfloat16, 0.17},
                                         quantize_case{"fashion_resnet", type::float16, 0.04}),
                         case_name);

}  // namespace

namespace {

// The instructions of a program compiled for the cpu target, by op name.
std::map<std::string, int> kernels(program p) {
    p.compile(*get_target("cpu"));
    std::map<std::string, int> n;
    for (const auto& ins : *p.get_main_module()) ++n[ins.name()];
    return n;
}

}  // namespace

// On the cpu target a float16 program runs on the float32 kernels (widen_reduced.hpp): the
// same kernels as the float32 program, so it is never slower (no converts, no reference
// kernels). A bfloat16 one too where the CPU lacks native bf16 (KILN_CPU_BF16=0 acts so);
// with it, every convolution is oneDNN's, computing in bf16.
TEST(quantize_model_cpu, fp16_same_kernels_as_float32_bf16_convolutions_on_onednn) {
    for (const std::string m : {"bert_small", "mobilenet_v2"}) {
        auto dir = models_dir / m;
        if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
        param_map inputs;
        const auto f32 = kernels(parse_static(dir, inputs));
        auto p = parse_static(dir, inputs);
        quantize_fp16(p);
        EXPECT_EQ(kernels(p), f32) << m;
        auto q = parse_static(dir, inputs);
        quantize_bf16(q);
        auto bf16 = kernels(q);
        const char* off = std::getenv("KILN_CPU_BF16");
        if (!cpu::has_native_bf16() || (off && std::string(off) == "0")) {
            EXPECT_EQ(bf16, f32) << m;
            continue;
        }
        EXPECT_EQ(bf16.count("cpu::winograd_conv") + bf16.count("cpu::conv_gemm"), 0u) << m;
        EXPECT_EQ(bf16["cpu::packed_gemm"], f32.count("cpu::packed_gemm") ? f32.at("cpu::packed_gemm") : 0) << m;
    }
}
