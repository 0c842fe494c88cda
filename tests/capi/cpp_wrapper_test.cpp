// kiln.hpp, the header-only C++ wrapper: the workflow, and status codes mapped to
// exception classes carrying the C API's message.
#include <kiln/kiln.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <future>

namespace fs = std::filesystem;
namespace api = kiln::api;

namespace {
const fs::path source_dir = KILN_SOURCE_DIR;
const fs::path add_relu = source_dir / "tests" / "data" / "models" / "add_relu.onnx";
}  // namespace

TEST(capi_cpp_wrapper, workflow) {
    auto p = api::parse_onnx(add_relu.string());
    EXPECT_EQ(p.input_names(), (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(p.output_names(), (std::vector<std::string>{"z"}));
    auto s = p.input_shape("x");
    EXPECT_EQ(s.type(), KILN_TYPE_FLOAT32);
    EXPECT_EQ(s.lens(), (std::vector<std::size_t>{2, 3}));
    EXPECT_EQ(s.strides(), (std::vector<std::size_t>{3, 1}));
    EXPECT_FALSE(s.dynamic());
    EXPECT_EQ(s.to_string(), "float32[2, 3]");
    p.compile(api::target("cpu"), api::compile_options().fast_math(false).tf32(true).threads(1));  // tf32: gpu only
    EXPECT_TRUE(p.is_compiled());
    std::vector<float> x{1, -2, 3, -4, 5, -6}, y{1, 1, 1, 1, 1, 1};
    auto out = p.run({{"x", api::argument(s, x)}, {"y", api::argument(s, y)}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{2, 0, 4, 0, 6, 0}));

    std::vector<float> mine(6, -1.f);
    p.run_into({{"x", api::argument(s, x)}, {"y", api::argument::wrap(s, y.data(), 24)}},
               {api::argument::wrap(s, mine.data(), mine.size() * sizeof(float))});
    EXPECT_EQ(mine, (std::vector<float>{2, 0, 4, 0, 6, 0}));

    auto path = (fs::path(::testing::TempDir()) / "capi_wrapper.kiln").string();
    p.save(path);
    auto again = api::load(path);
    EXPECT_EQ(again.run({{"x", api::argument(s, x)}, {"y", api::argument(s, y)}})[0].to_vector<float>(),
              out[0].to_vector<float>());
    EXPECT_GT(again.get_memory_usage().parameter_bytes + again.get_memory_usage().output_bytes, 0u);
    fs::remove(path);
}

TEST(capi_cpp_wrapper, dynamic_dims_and_options) {
    auto p = api::parse_onnx((source_dir / "tests" / "data" / "models" / "mlp_dynamic.onnx").string(),
                             api::onnx_options().dyn_input_dims("x", {{1, 8, {2}, ""}, {4, 4, {}, ""}}));
    auto s = p.input_shape("x");
    EXPECT_TRUE(s.dynamic());
    auto d = s.dyn_dim(0);
    EXPECT_EQ(d.min, 1u);
    EXPECT_EQ(d.max, 8u);
    EXPECT_EQ(d.optimals, (std::vector<std::size_t>{2}));
    EXPECT_EQ(s.lens(), (std::vector<std::size_t>{2, 4}));  // the optimal is the default
    p.compile(api::target("cpu"), api::compile_options().dynamic_buckets("batch", {1, 4}));
    for (std::size_t batch : {1, 3, 8}) {
        api::shape in(KILN_TYPE_FLOAT32, {batch, 4});
        auto out = p.run({{"x", api::argument(in, std::vector<float>(batch * 4, 0.5f))}});
        auto probs = out[0].to_vector<float>();
        ASSERT_EQ(probs.size(), batch * 3);
        EXPECT_NEAR(probs[0] + probs[1] + probs[2], 1.0, 1e-5);  // a softmax row
    }
}

TEST(capi_cpp_wrapper, errors_map_to_exception_classes) {
    EXPECT_THROW(api::parse_onnx("/nonexistent/model.onnx"), api::io_error);
    EXPECT_THROW(api::target("no-such-target"), api::invalid_argument_error);
    EXPECT_THROW(api::load((source_dir / "tests" / "data" / "bad_models" / "not_protobuf.onnx").string()),
                 api::parse_error);
    auto p = api::parse_onnx(add_relu.string());
    p.compile(api::target("ref"));
    api::shape wrong(KILN_TYPE_FLOAT32, {3, 2});
    try {
        p.run({{"x", api::argument(wrong)}, {"y", api::argument(wrong)}});
        FAIL() << "no exception";
    } catch (const api::shape_error& e) {
        EXPECT_EQ(e.status(), KILN_STATUS_SHAPE);
        EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
    }
    EXPECT_THROW(p.run({{"x", api::argument(api::shape(KILN_TYPE_INT32, {2, 3}))}}), api::error);
    EXPECT_THROW(api::compile_options().device_id(-1), api::invalid_argument_error);
    EXPECT_FALSE(api::version().empty());
    auto names = api::target::names();
    EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
    EXPECT_TRUE(api::target("cpu").available());
}

// run_async through kiln_program_run_async: results, errors (with the C message),
// several runs at once, and a program whose last handle goes while the runs are on.
TEST(capi_cpp_wrapper, run_async) {
    api::shape s(KILN_TYPE_FLOAT32, {2, 3});
    std::vector<float> x{1, -2, 3, -4, 5, -6}, y{1, 1, 1, 1, 1, 1};
    std::vector<std::future<std::vector<api::argument>>> runs;
    {
        auto p = api::parse_onnx(add_relu.string());
        p.compile(api::target("cpu"));
        for (int i = 0; i < 4; ++i)
            runs.push_back(p.run_async({{"x", api::argument(s, x)}, {"y", api::argument(s, y)}}));
        api::shape wrong(KILN_TYPE_FLOAT32, {3, 2});
        auto bad = p.run_async({{"x", api::argument(wrong)}, {"y", api::argument(wrong)}});
        try {
            bad.get();
            ADD_FAILURE() << "no exception";
        } catch (const api::shape_error& e) {
            EXPECT_NE(std::string(e.what()).find("input 'x'"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("kiln_program_run_async"), std::string::npos) << e.what();
        }
    }  // the program handle is gone; the runs hold the program
    for (auto& r : runs) EXPECT_EQ(r.get()[0].to_vector<float>(), (std::vector<float>{2, 0, 4, 0, 6, 0}));
}
