// Runs the C program of c_workflow.c (compiled as C) on shared models.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "c_workflow.h"

namespace fs = std::filesystem;

namespace {

void run_workflow(const std::string& model, int data_sets) {
    fs::path dir = fs::path(KILN_SHARED_DIR) / "models" / model;
    if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << dir << " is missing";
    auto kiln_path = (fs::path(::testing::TempDir()) / ("capi_" + model + ".kiln")).string();
    char report[4096];
    EXPECT_EQ(kiln_c_workflow(dir.c_str(), data_sets, kiln_path.c_str(), report, sizeof report), 1) << report;
    fs::remove(kiln_path);
}

}  // namespace

// Trained weights, batch 16 and 1: a small, well-conditioned check.
TEST(capi_c_workflow, fashion_resnet) { run_workflow("fashion_resnet", 2); }
// The deployment guide's model (ResNet-50 v1.5, 102 MB): parse, compile, run, save and load from C.
TEST(capi_c_workflow, resnet50) { run_workflow("resnet50", 2); }
// A real CNN (depthwise convolutions, Clip), batch 1 and 2.
TEST(capi_c_workflow, mobilenet_v2) { run_workflow("mobilenet_v2", 2); }
