// On a machine without a usable GPU the gpu target says why, in C++ and the C API, and
// never crashes: programs compile (NVRTC needs no device) but eval and load say why not; on one with a GPU it reports nothing (GPU runs of these
// lines happen in the device suite, tests/gpu_device).
#include "targets/gpu/availability.hpp"

#include <kiln/errors.hpp>
#include <kiln/kiln.h>
#include <kiln/program.hpp>
#include <kiln/serialize.hpp>
#include <kiln/register_op.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

using namespace kiln;

namespace {

bool says_why(const std::string& why) {
    return why == "no CUDA driver" || (why.rfind("no CUDA device: ", 0) == 0 && why.size() > 16);
}

}  // namespace

TEST(gpu_availability, the_target_says_why_it_cannot_run) {
    const auto why = get_target("gpu")->unavailable_reason();
    if (why.empty()) GTEST_SKIP() << "this machine has a CUDA device";
    EXPECT_TRUE(says_why(why)) << why;
    EXPECT_EQ(why, gpu::unavailable_reason());
    std::cout << "[ gpu      ] gpu: unavailable: " << why << "\n";
}

TEST(gpu_availability, programs_compile_without_a_device_but_do_not_run) {
    const auto t = get_target("gpu");
    const auto why = t->unavailable_reason();
    if (why.empty()) GTEST_SKIP() << "this machine has a CUDA device";
    EXPECT_EQ(t->compile_unavailable_reason(), "") << "NVRTC needs no device";
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4}));
    m->add_return({m->add_instruction(make_op("relu"), {x})});
    compile_options o;
    o.gpu_arch = "sm_90a";
    p.compile(*t, o);
    EXPECT_EQ(p.target_name(), "gpu");
    EXPECT_EQ(p.get_compile_options().gpu_arch, "sm_90a");
    argument in(shape(type::float32, {4}));
    try {
        (void)p.eval({{"x", in}});
        FAIL() << "ran on an unavailable gpu";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);
        EXPECT_EQ(e.message(), "target gpu is not available: " + why);
    }
    // Saved, it carries its kernels' CUBIN; loading is for running, so it says why not here.
    const auto file = std::filesystem::temp_directory_path() / ("kiln_gpu_" + std::to_string(::getpid()) + ".kiln");
    save(p, file.string());
    try {
        (void)load(file.string());
        FAIL() << "loaded for an unavailable gpu";
    } catch (const error& e) {
        EXPECT_NE(e.message().find(why), std::string::npos) << e.message();
    }
    std::filesystem::remove(file);
}

TEST(gpu_availability, the_c_api_says_the_same) {
    kiln_target t = nullptr;
    ASSERT_EQ(kiln_target_get("gpu", &t), KILN_STATUS_SUCCESS);
    int available = -1;
    const char* reason = nullptr;
    ASSERT_EQ(kiln_target_available(t, &available, &reason), KILN_STATUS_SUCCESS);
    const auto why = get_target("gpu")->unavailable_reason();
    EXPECT_EQ(available, why.empty() ? 1 : 0);
    EXPECT_EQ(std::string(reason ? reason : ""), why);
    kiln_target_destroy(t);
}

TEST(gpu_availability, the_libraries_answer_without_a_device) {
    const auto v = gpu::library_versions();
    EXPECT_NE(v.find("nvrtc 13."), std::string::npos) << v;
    EXPECT_NE(v.find("cudnn 9"), std::string::npos) << v;
    EXPECT_NE(v.find("cublasLt 13"), std::string::npos) << v;
    std::cout << "[ gpu      ] " << v << "\n";
}
