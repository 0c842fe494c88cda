// quantize_fp16 / quantize_bf16 on real models against ONNX Runtime's float32 outputs
// (../shared/models, test_data_set_0): the rel. L2 bounds of issue 20. On the target
// KILN_MODEL_TEST_TARGET names (ref by default: there the ops really compute in 16 bits).
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const fs::path models_dir = fs::path(KILN_SHARED_DIR) / "models";

std::string target_under_test() {
    const char* t = std::getenv("KILN_MODEL_TEST_TARGET");
    return t ? t : "ref";
}

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
    auto p = parse_onnx((dir / "model.onnx").string());
    param_map inputs;
    onnx_options opts;
    const auto names = p.get_parameter_names();
    for (std::size_t i = 0; i < names.size(); ++i) {
        inputs[names[i]] = read_tensor_proto((set / ("input_" + std::to_string(i) + ".pb")).string());
        opts.map_input_dims[names[i]] = inputs[names[i]].get_shape().lens();
    }
    p = parse_onnx((dir / "model.onnx").string(), opts);
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
