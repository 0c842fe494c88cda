// Replays the serve fuzzer's corpus kept in tests/data/serve_fuzz/ (scripts/fuzz.sh
// SECONDS serve): the seeds, requests as clients send them, must be answered (those named
// *_refused refused), and the findings must end in a refusal or an answer, never a 500,
// another exception or a crash.
#ifdef KILN_SERVE_GRPC
#include "../../fuzz/serve_fuzz_driver.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

namespace {

namespace fs = std::filesystem;

TEST(serve_fuzz_regression, seeds_are_answered_and_findings_refused) {
    const fs::path dir = fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "serve_fuzz";
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file() && e.path().filename() != "README.md") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    int seeds = 0, findings = 0;
    for (auto& f : files) {
        const auto name = f.filename().string();
        SCOPED_TRACE(name);
        std::ifstream in(f, std::ios::binary);
        std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        try {
            bool answered = kiln::fuzz::run_serve_bytes(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
            if (name.starts_with("seed_")) {
                EXPECT_EQ(answered, !name.ends_with("_refused"));
                ++seeds;
            } else {
                ++findings;
            }
        } catch (const std::exception& e) {
            ADD_FAILURE() << e.what();
        }
    }
    EXPECT_GE(seeds, 9);
    std::cout << seeds << " seeds and " << findings << " findings replayed\n";
}

}  // namespace
#endif
