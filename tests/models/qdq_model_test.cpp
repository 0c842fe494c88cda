// The quantized (QDQ) models of ../shared/models against ONNX Runtime's stored outputs
// (its spec-exact run with graph optimization disabled), with the bounds the quantization
// issue sets: our integer kernels round differently from float Q/DQ, and the random CNN
// amplifies every rounding flip, so these are statistical bounds, not element bounds.
// Also: fuse_qdq turns every Conv / MatMul / Gemm of both models into an integer op.
#include <kiln/onnx.hpp>
#include <kiln/pass.hpp>
#include <kiln/pipeline.hpp>
#include <kiln/program.hpp>

#include "shared_models.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>

namespace fs = std::filesystem;
using namespace kiln;

namespace {

const fs::path models_dir = fs::path(KILN_SHARED_DIR) / "models";

using test::target_under_test;

struct qdq_case {
    const char* model;
    double max_rel_l2;
    double min_cosine;
    bool per_row_cosine;  // cosine of each last-dim row (BERT: per token), else of the whole output
    std::size_t products;  // Conv + MatMul + Gemm in the model
};

double dot(const std::vector<double>& a, const std::vector<double>& b, std::size_t from, std::size_t n) {
    double s = 0;
    for (std::size_t i = from; i < from + n; ++i) s += a[i] * b[i];
    return s;
}

class qdq_model : public testing::TestWithParam<qdq_case> {};

TEST_P(qdq_model, fused_products_match_onnx_runtime_within_the_issue_bounds) {
    const auto c = GetParam();
    const auto dir = models_dir / c.model;
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is not there";
    auto names = parse_onnx((dir / "model.onnx").string()).get_parameter_names();
    for (std::size_t k = 0; fs::exists(dir / ("test_data_set_" + std::to_string(k))); ++k) {
        const auto set = dir / ("test_data_set_" + std::to_string(k));
        param_map inputs;
        onnx_options opts;
        for (std::size_t i = 0; i < names.size(); ++i) {
            auto a = read_tensor_proto((set / ("input_" + std::to_string(i) + ".pb")).string());
            opts.map_input_dims[names[i]] = a.get_shape().lens();
            inputs[names[i]] = a;
        }
        auto p = parse_onnx((dir / "model.onnx").string(), opts);
        p.compile(*get_target(target_under_test()));
        auto out = p.eval(inputs);
        auto expected = read_tensor_proto((set / "output_0.pb").string()).to_vector<double>();
        auto got = out.at(0).to_vector<double>();
        ASSERT_EQ(got.size(), expected.size());
        std::vector<double> diff(got.size());
        for (std::size_t i = 0; i < got.size(); ++i) diff[i] = got[i] - expected[i];
        const double rel_l2 = std::sqrt(dot(diff, diff, 0, diff.size()) / dot(expected, expected, 0, expected.size()));
        const std::size_t row = c.per_row_cosine ? out[0].get_shape().lens().back() : got.size();
        double min_cos = 1;
        for (std::size_t r = 0; r < got.size(); r += row)
            min_cos = std::min(min_cos, dot(got, expected, r, row) / std::sqrt(dot(got, got, r, row) *
                                                                                dot(expected, expected, r, row)));
        EXPECT_LE(rel_l2, c.max_rel_l2) << c.model << " set " << k;
        EXPECT_GE(min_cos, c.min_cosine) << c.model << " set " << k;
        std::cout << c.model << " set " << k << " (" << target_under_test() << "): rel. L2 " << rel_l2
                  << ", min cosine " << min_cos << "\n";
    }
}

TEST_P(qdq_model, every_product_becomes_an_integer_op) {
    const auto c = GetParam();
    const auto path = models_dir / c.model / "model.onnx";
    if (!fs::exists(path)) GTEST_SKIP();
    auto p = parse_onnx(path.string());
    run_passes(p, target_independent_passes(compile_options{}));
    std::size_t fused = 0, left = 0;
    for (const auto& ins : *p.get_main_module()) {
        const auto n = ins.name();
        fused += n == "quant_convolution" || n == "quant_dot";
        left += n == "convolution" || n == "matmul" || n == "gemm";
    }
    EXPECT_EQ(fused, c.products);
    EXPECT_EQ(left, 0u);
}

INSTANTIATE_TEST_SUITE_P(models, qdq_model,
                         testing::Values(qdq_case{"bert_small_qdq", 0.01, 0.9999, true, 32},
                                         qdq_case{"mobilenet_v2_qdq", 0.2, 0.99, false, 53}),
                         [](const auto& info) { return std::string(info.param.model); });

}  // namespace
