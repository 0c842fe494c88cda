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

// The tool, libkiln, libkiln_c, the gpu module.
std::vector<std::string> binaries() {
    return {KILN_TOOL_FILE, KILN_LIBRARY_FILE, KILN_C_LIBRARY_FILE, KILN_GPU_LIBRARY_FILE};
}

const char* const cuda_libraries[] = {"libcudart.so", "libnvrtc.so", "libcublasLt.so", "libcudnn.so"};

// What the dynamic loader loads for one run of the tool (LD_DEBUG=files names each file).
std::string libraries_loaded_by(const std::string& args) {
    return output_of("LD_DEBUG=files '" + std::string(KILN_TOOL_FILE) + "' " + args);
}

}  // namespace

TEST(gpu_build, no_binary_needs_libcuda) {
    const auto files = binaries();
    ASSERT_GE(files.size(), 4u);
    for (const auto& f : files) {
        const auto needed = output_of("readelf -d '" + f + "'");
        ASSERT_NE(needed.find("(NEEDED)"), std::string::npos) << "readelf failed on " << f << ":\n" << needed;
        EXPECT_EQ(needed.find("libcuda.so"), std::string::npos) << f << " needs libcuda:\n" << needed;
        const auto resolved = output_of("ldd '" + f + "'");
        EXPECT_EQ(resolved.find("libcuda.so"), std::string::npos) << f << " loads libcuda:\n" << resolved;
        EXPECT_EQ(resolved.find("not found"), std::string::npos) << f << ":\n" << resolved;
    }
}

// The CUDA libraries are the gpu module's alone: libkiln loads it on first use, so that a
// process that never asks for `gpu` never pays their start-up (~0.7 s, tools/kiln, Python).
TEST(gpu_build, the_gpu_module_links_the_runtime_api_nvrtc_and_the_libraries_and_libkiln_none) {
    const auto module = output_of("readelf -d '" + std::string(KILN_GPU_LIBRARY_FILE) + "'");
    const auto core = output_of("readelf -d '" + std::string(KILN_LIBRARY_FILE) + "'");
    ASSERT_NE(core.find("(NEEDED)"), std::string::npos) << core;
    for (const char* lib : cuda_libraries) {
        EXPECT_NE(module.find(lib), std::string::npos) << lib << ":\n" << module;
        EXPECT_EQ(core.find(lib), std::string::npos) << "libkiln needs " << lib << ":\n" << core;
    }
    EXPECT_EQ(core.find("kiln_gpu"), std::string::npos) << core;
}

TEST(gpu_build, the_tool_loads_the_gpu_module_only_when_asked_for_gpu) {
    const auto plain = libraries_loaded_by("--version");
    ASSERT_NE(plain.find("libkiln.so"), std::string::npos) << "LD_DEBUG gave nothing:\n" << plain;
    EXPECT_EQ(plain.find("kiln_gpu"), std::string::npos) << plain;
    for (const char* lib : cuda_libraries) EXPECT_EQ(plain.find(lib), std::string::npos) << lib << " loaded:\n" << plain;
    const auto listed = libraries_loaded_by("targets");  // says whether gpu can run here: loads it
    EXPECT_NE(listed.find("kiln_gpu"), std::string::npos) << listed;
    EXPECT_NE(listed.find("libcudart.so"), std::string::npos) << listed;
}
