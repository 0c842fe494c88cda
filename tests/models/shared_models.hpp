// The real models of ../shared/models (each folder's model.onnx), for the model tests that
// go over all of them.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace kiln::test {

// Sorted by folder name; empty when the shared folder is not there.
inline std::vector<std::filesystem::path> shared_model_files() {
    namespace fs = std::filesystem;
    std::vector<fs::path> out;
    const fs::path models = fs::path(KILN_SHARED_DIR) / "models";
    if (!fs::exists(models)) return out;
    for (auto& entry : fs::directory_iterator(models))
        if (fs::exists(entry.path() / "model.onnx")) out.push_back(entry.path() / "model.onnx");
    std::sort(out.begin(), out.end());
    return out;
}

// The target the model tests compile for: $KILN_MODEL_TEST_TARGET, ref by default.
inline std::string target_under_test() {
    const char* t = std::getenv("KILN_MODEL_TEST_TARGET");
    return t ? t : "ref";
}

}  // namespace kiln::test
