// Replays what the ONNX fuzzer found (tests/data/fuzz/, kept by scripts/fuzz.sh):
// each input goes through the fuzzer's own steps (parse, compile for ref, run on small
// inputs) and must end normally or in a kiln::error.
#include "../../fuzz/onnx_fuzz_driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace kiln::test {
namespace {

namespace fs = std::filesystem;

TEST(onnx_fuzz_regression, findings_end_in_kiln_errors) {
    const fs::path dir = fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "fuzz";
    std::vector<fs::path> files;
    if (fs::exists(dir))
        for (auto& e : fs::directory_iterator(dir))
            if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    int parsed = 0;
    for (auto& f : files) {
        SCOPED_TRACE(f.filename().string());
        std::ifstream in(f, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        try {
            parsed += fuzz::run_onnx_bytes(bytes.data(), bytes.size()).parsed;
        } catch (const std::exception& e) {
            ADD_FAILURE() << "not a kiln::error: " << e.what();
        }
    }
    std::cout << files.size() << " fuzz findings replayed, " << parsed << " parse\n";
}

}  // namespace
}  // namespace kiln::test
