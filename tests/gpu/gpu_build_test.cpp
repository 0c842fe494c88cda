// The built binaries never need libcuda (the driver): one that did would not start on a
// machine without a GPU driver. The CUDA runtime (libcudart) loads the driver itself when
// a program first asks for a device.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace {

std::string output_of(const std::string& cmd) {
    std::string out;
    std::unique_ptr<FILE, int (*)(FILE*)> pipe(::popen((cmd + " 2>&1").c_str(), "r"), ::pclose);
    if (!pipe) return out;
    std::array<char, 4096> buf;
    while (std::fgets(buf.data(), buf.size(), pipe.get())) out += buf.data();
    return out;
}

// The tool, libkiln, libkiln_c.
std::vector<std::string> binaries() { return {KILN_TOOL_FILE, KILN_LIBRARY_FILE, KILN_C_LIBRARY_FILE}; }

}  // namespace

TEST(gpu_build, no_binary_needs_libcuda) {
    const auto files = binaries();
    ASSERT_GE(files.size(), 3u);
    for (const auto& f : files) {
        const auto needed = output_of("readelf -d '" + f + "'");
        ASSERT_NE(needed.find("(NEEDED)"), std::string::npos) << "readelf failed on " << f << ":\n" << needed;
        EXPECT_EQ(needed.find("libcuda.so"), std::string::npos) << f << " needs libcuda:\n" << needed;
        const auto resolved = output_of("ldd '" + f + "'");
        EXPECT_EQ(resolved.find("libcuda.so"), std::string::npos) << f << " loads libcuda:\n" << resolved;
        EXPECT_EQ(resolved.find("not found"), std::string::npos) << f << ":\n" << resolved;
    }
}

TEST(gpu_build, libkiln_links_the_runtime_api_nvrtc_and_the_libraries) {
    const auto needed = output_of("readelf -d '" + binaries()[1] + "'");
    for (const char* lib : {"libcudart.so", "libnvrtc.so", "libcublasLt.so", "libcudnn.so"})
        EXPECT_NE(needed.find(lib), std::string::npos) << lib << ":\n" << needed;
}
