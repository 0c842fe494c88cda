// The text form of real graphs reads back: each model of ../shared/models, the test
// models of tests/data and the ONNX backend tests' models, parsed by the frontend, printed,
// read back (with the program's own weights, see module_text.hpp) and printed again give
// the same text. The shared models also go through the ref target, so lowered modules
// (kernels wrapping ops, planned loads from the arena) read back too.
#include "shared_models.hpp"

#include <kiln/module_text.hpp>
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace kiln {
namespace {

// Empty when the text reads back the same, else what went wrong.
std::string round_trip_failure(const program& p) {
    auto text = p.to_string();
    try {
        auto again = parse_program(text, {literals_of(p)}).to_string();
        if (again == text) return "";
        std::size_t at = 0;
        while (at < text.size() && at < again.size() && text[at] == again[at]) ++at;
        auto line_start = text.rfind('\n', at);
        line_start = line_start == std::string::npos ? 0 : line_start + 1;
        return "texts differ at\n  " + text.substr(line_start, text.find('\n', at) - line_start) + "\nread back as\n  " +
               again.substr(line_start, again.find('\n', at) - line_start);
    } catch (const std::exception& e) {
        return std::string("does not read back: ") + e.what();
    }
}

std::vector<fs::path> onnx_files_under(const fs::path& dir) {
    std::vector<fs::path> files;
    if (!fs::exists(dir)) return files;
    for (auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().extension() == ".onnx") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    return files;
}

TEST(ir_text_models, shared_models_parsed_and_compiled_for_ref) {
    const auto files = test::shared_model_files();
    if (files.empty()) GTEST_SKIP() << "no shared models";
    std::size_t n = 0;
    for (const auto& onnx : files) {
        SCOPED_TRACE(onnx.parent_path().filename().string());
        program p = parse_onnx(onnx.string());
        EXPECT_EQ(round_trip_failure(p), "");
        p.compile(*get_target("ref"));
        EXPECT_EQ(round_trip_failure(p), "") << "compiled for ref";
        ++n;
    }
    RecordProperty("models", static_cast<int>(n));
    EXPECT_GE(n, 9u);
}

TEST(ir_text_models, test_data_and_backend_test_models) {
    auto files = onnx_files_under(fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "models");
    auto dynamic = onnx_files_under(fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "dynamic_models");
    auto backend = onnx_files_under(fs::path(KILN_SHARED_DIR) / "onnx-backend-tests");
    files.insert(files.end(), dynamic.begin(), dynamic.end());
    files.insert(files.end(), backend.begin(), backend.end());
    std::size_t read = 0;
    for (auto& f : files) {
        program p;
        try {
            p = parse_onnx(f.string());
        } catch (const error&) {
            continue;  // what the frontend refuses is its own tests' business
        }
        EXPECT_EQ(round_trip_failure(p), "") << f;
        ++read;
    }
    RecordProperty("models_read", static_cast<int>(read));
    RecordProperty("models_found", static_cast<int>(files.size()));
    EXPECT_GT(read, files.size() / 2) << "of " << files.size();
}

}  // namespace
}  // namespace kiln
