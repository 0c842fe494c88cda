// The real models of ../shared/models (each folder's model.onnx), for the model tests that
// go over all of them.
#pragma once
#include <algorithm>
#include <filesystem>
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

}  // namespace kiln::test
