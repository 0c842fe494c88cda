// On a machine without a usable GPU the gpu target says why, in C++, the C API and at
// compile time, and never crashes; on one with a GPU it reports nothing (GPU runs of these
// lines happen in the device suite, tests/gpu_device).
#include "targets/gpu/availability.hpp"

#include <kiln/errors.hpp>
#include <kiln/kiln.h>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

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

TEST(gpu_availability, compiling_for_it_is_a_clear_error) {
    const auto t = get_target("gpu");
    const auto why = t->unavailable_reason();
    if (why.empty()) GTEST_SKIP() << "this machine has a CUDA device";
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4}));
    m->add_return({m->add_instruction(make_op("relu"), {x})});
    try {
        p.compile(*t);
        FAIL() << "compiled for an unavailable gpu";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);
        EXPECT_EQ(e.message(), "target gpu is not available: " + why);
    }
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
