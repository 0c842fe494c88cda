// Building programs through the C API (kiln_program_create, kiln_module_add_*): the same
// network built by hand and parsed from ONNX gives the same numbers; a small CNN agrees between
// the ref and cpu targets; bad builds are refused with a message naming what is wrong.
#include <kiln/kiln.h>
#include <kiln/kiln.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace fs = std::filesystem;
namespace api = kiln::api;

namespace {
const fs::path add_relu = fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "models" / "add_relu.onnx";

#define OK(call) ASSERT_EQ((call), KILN_STATUS_SUCCESS) << kiln_last_error_message()

std::vector<float> random_values(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::vector<float> v(n);
    for (auto& x : v) x = u(rng);
    return v;
}
}  // namespace

// z = relu(x + y) through the C functions, against add_relu.onnx parsed.
TEST(capi_build, built_by_hand_equals_parsed_from_onnx) {
    size_t lens[] = {2, 3};
    kiln_shape s = nullptr;
    OK(kiln_shape_create(KILN_TYPE_FLOAT32, lens, 2, nullptr, &s));
    kiln_program built = nullptr;
    OK(kiln_program_create(&built));
    kiln_module mm = nullptr;
    OK(kiln_program_get_main_module(built, &mm));
    kiln_instruction x = nullptr, y = nullptr, sum = nullptr, relu = nullptr;
    OK(kiln_module_add_parameter(mm, "x", s, &x));
    OK(kiln_module_add_parameter(mm, "y", s, &y));
    kiln_instruction xy[] = {x, y};
    OK(kiln_module_add_instruction(mm, "add", nullptr, xy, 2, &sum));
    OK(kiln_module_add_instruction(mm, "relu", "{}", &sum, 1, &relu));
    OK(kiln_module_add_return(mm, &relu, 1));
    const char* text = nullptr;
    OK(kiln_module_to_string(mm, &text));
    EXPECT_NE(std::string(text).find("relu"), std::string::npos) << text;
    size_t inputs = 0;
    OK(kiln_program_input_count(built, &inputs));
    EXPECT_EQ(inputs, 2u);
    kiln_shape out_shape = nullptr;
    OK(kiln_instruction_shape(relu, &out_shape));
    const char* out_text = nullptr;
    OK(kiln_shape_to_string(out_shape, &out_text));
    EXPECT_STREQ(out_text, "float32[2, 3]");

    kiln_program parsed = nullptr;
    OK(kiln_parse_onnx(add_relu.string().c_str(), nullptr, &parsed));
    kiln_target cpu = nullptr;
    OK(kiln_target_get("cpu", &cpu));
    OK(kiln_program_compile(built, cpu, nullptr));
    OK(kiln_program_compile(parsed, cpu, nullptr));

    auto xv = random_values(6, 1), yv = random_values(6, 2);
    kiln_argument xa = nullptr, ya = nullptr;
    OK(kiln_argument_create(s, xv.data(), 24, &xa));
    OK(kiln_argument_create(s, yv.data(), 24, &ya));
    kiln_params params = nullptr;
    OK(kiln_params_create(&params));
    OK(kiln_params_add(params, "x", xa));
    OK(kiln_params_add(params, "y", ya));
    std::vector<float> results[2];
    kiln_program programs[] = {built, parsed};
    for (int i = 0; i < 2; ++i) {
        kiln_arguments outs = nullptr;
        OK(kiln_program_run(programs[i], params, &outs));
        kiln_argument o = nullptr;
        OK(kiln_arguments_get(outs, 0, &o));
        results[i].resize(6);
        OK(kiln_argument_copy_to(o, results[i].data(), 24));
        kiln_argument_destroy(o);
        kiln_arguments_destroy(outs);
    }
    EXPECT_EQ(results[0], results[1]);
    for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(results[0][i], std::max(0.f, xv[i] + yv[i]));

    kiln_module after = nullptr;
    OK(kiln_program_get_main_module(built, &after));
    kiln_instruction more = nullptr;
    EXPECT_EQ(kiln_module_add_instruction(after, "relu", nullptr, &relu, 1, &more), KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kiln_last_error_message()).find("compiled"), std::string::npos);

    for (auto a : {xa, ya}) kiln_argument_destroy(a);
    kiln_params_destroy(params);
    kiln_target_destroy(cpu);
    kiln_shape_destroy(s);
    kiln_shape_destroy(out_shape);
    kiln_program_destroy(built);
    kiln_program_destroy(parsed);
}

// A conv + bias + relu + max pool network through kiln.hpp, ref against cpu.
TEST(capi_build, cnn_through_the_cpp_wrapper_agrees_on_ref_and_cpu) {
    auto w = random_values(4 * 3 * 3 * 3, 3), b = random_values(4, 4), xv = random_values(3 * 8 * 8, 5);
    std::vector<float> results[2];
    const char* targets[] = {"ref", "cpu"};
    for (int t = 0; t < 2; ++t) {
        api::program p;
        auto mm = p.get_main_module();
        auto x = mm.add_parameter("x", api::shape(KILN_TYPE_FLOAT32, {1, 3, 8, 8}));
        auto wl = mm.add_literal(api::argument(api::shape(KILN_TYPE_FLOAT32, {4, 3, 3, 3}), w));
        auto bl = mm.add_literal(api::argument(api::shape(KILN_TYPE_FLOAT32, {4}), b));
        auto conv = mm.add_instruction("convolution", R"({"padding": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1]})",
                                       {x, wl, bl});
        auto relu = mm.add_instruction("relu", "", {conv});
        auto pool = mm.add_instruction("pooling", R"({"mode": 1, "lengths": [2, 2], "stride": [2, 2]})", {relu});
        EXPECT_EQ(pool.get_shape().lens(), (std::vector<std::size_t>{1, 4, 4, 4}));
        mm.add_return({pool});
        p.compile(api::target(targets[t]));
        auto out = p.run({{"x", api::argument(api::shape(KILN_TYPE_FLOAT32, {1, 3, 8, 8}), xv)}});
        results[t] = out.at(0).to_vector<float>();
    }
    ASSERT_EQ(results[0].size(), 64u);
    float largest = 0;
    for (std::size_t i = 0; i < 64; ++i) {
        EXPECT_NEAR(results[0][i], results[1][i], 1e-5f * (1 + std::fabs(results[0][i])));
        largest = std::max(largest, results[0][i]);
    }
    EXPECT_GT(largest, 0.1f);  // not all zeros
}

TEST(capi_build, bad_builds_are_refused_with_a_message) {
    api::program p;
    auto mm = p.get_main_module();
    auto x = mm.add_parameter("x", api::shape(KILN_TYPE_FLOAT32, {2, 3}));
    auto y = mm.add_parameter("y", api::shape(KILN_TYPE_FLOAT32, {4, 5}));
    auto expect_error = [](auto f, const std::string& needle) {
        try {
            f();
            ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
        } catch (const api::error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    expect_error([&] { mm.add_instruction("no_such_op", "", {x}); }, "no_such_op");
    expect_error([&] { mm.add_instruction("relu", R"({"no_such_attribute": 1})", {x}); }, "no_such_attribute");
    expect_error([&] { mm.add_instruction("relu", "{not json", {x}); }, "not valid JSON");
    expect_error([&] { mm.add_instruction("relu", "[1, 2]", {x}); }, "JSON object");
    expect_error([&] { mm.add_instruction("dot", "", {x, y}); }, "dot");
    api::program other;
    auto z = other.get_main_module().add_parameter("z", api::shape(KILN_TYPE_FLOAT32, {2, 3}));
    expect_error([&] { mm.add_instruction("relu", "", {z}); }, "another module");
}

// Dim names through kiln_onnx_options_set_dyn_input_dim_symbol (and kiln.hpp's dyn_input_dims).
TEST(capi_options, dyn_input_dim_symbols) {
    const auto mlp = fs::path(KILN_SOURCE_DIR) / "tests" / "data" / "models" / "mlp_dynamic.onnx";
    kiln_onnx_options o = nullptr;
    OK(kiln_onnx_options_create(&o));
    size_t lo[] = {1, 4}, hi[] = {16, 4}, opt[] = {8};
    OK(kiln_onnx_options_set_dyn_input_dims(o, "x", lo, hi, 2));
    OK(kiln_onnx_options_set_dyn_input_dim_symbol(o, "x", 0, "rows"));
    OK(kiln_onnx_options_set_dyn_input_dim_optimals(o, "x", 0, opt, 1));  // keeps the name
    EXPECT_EQ(kiln_onnx_options_set_dyn_input_dim_symbol(o, "x", 0, "1 +"), KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(kiln_last_error_message()).find("not a name"), std::string::npos);
    EXPECT_EQ(kiln_onnx_options_set_dyn_input_dim_symbol(o, "x", 5, "rows"), KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(kiln_onnx_options_set_dyn_input_dim_symbol(o, "nope", 0, "rows"), KILN_STATUS_INVALID_ARGUMENT);
    kiln_program p = nullptr;
    OK(kiln_parse_onnx(mlp.string().c_str(), o, &p));
    kiln_shape s = nullptr;
    OK(kiln_program_input_shape(p, "x", &s));
    const char* symbol = nullptr;
    OK(kiln_shape_dyn_dim_symbol(s, 0, &symbol));
    EXPECT_STREQ(symbol, "rows");
    size_t mn = 0, mx = 0;
    OK(kiln_shape_dyn_dim(s, 0, &mn, &mx));
    EXPECT_EQ(mn, 1u);
    EXPECT_EQ(mx, 16u);
    kiln_shape_destroy(s);
    kiln_program_destroy(p);
    kiln_onnx_options_destroy(o);

    auto q = api::parse_onnx(mlp.string(), api::onnx_options().dyn_input_dims("x", {{1, 8, {}, "b"}, {4, 4, {}, ""}}));
    EXPECT_EQ(q.input_shape("x").dyn_dim(0).symbol, "b");
}

// A sequence output (SplitToSequence from the ONNX backend tests) read element by element.
TEST(capi_arguments, sequence_outputs_by_element) {
    const auto folder = fs::path(KILN_SOURCE_DIR).parent_path() / "shared" / "onnx-backend-tests" / "node" /
                        "test_split_to_sequence_1";
    if (!fs::exists(folder / "model.onnx")) GTEST_SKIP() << folder << " is not there";
    auto p = api::parse_onnx((folder / "model.onnx").string());
    p.compile(api::target("cpu"));
    auto data = api::argument::read_tensor_proto((folder / "test_data_set_0" / "input_0.pb").string());
    auto split = api::argument::read_tensor_proto((folder / "test_data_set_0" / "input_1.pb").string());
    auto outs = p.run({{"data", data}, {"split", split}});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].get_shape().kind(), KILN_SHAPE_SEQUENCE);
    auto items = outs[0].elements();
    ASSERT_GE(items.size(), 2u);
    // Concatenated along axis 1 the items give the input back.
    auto in = data.to_vector<float>();
    auto lens = data.get_shape().lens();  // [3, 6]
    std::size_t col = 0;
    for (auto& item : items) {
        auto il = item.get_shape().lens();
        ASSERT_EQ(il.size(), 2u);
        ASSERT_EQ(il[0], lens[0]);
        auto v = item.to_vector<float>();
        for (std::size_t r = 0; r < il[0]; ++r)
            for (std::size_t c = 0; c < il[1]; ++c) EXPECT_EQ(v[r * il[1] + c], in[r * lens[1] + col + c]);
        col += il[1];
    }
    EXPECT_EQ(col, lens[1]);
    // A tensor has no elements; an index past the end is refused.
    kiln_argument none = nullptr;
    size_t count = 0;
    EXPECT_EQ(kiln_argument_element_count(data.get(), &count), KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(kiln_argument_element(outs[0].get(), items.size(), &none), KILN_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(none, nullptr);
    // Written as the backend tests store it: a SequenceProto.
    auto path = (fs::path(::testing::TempDir()) / "capi_sequence.pb").string();
    outs[0].write_tensor_proto("output", path);
    EXPECT_GT(fs::file_size(path), 0u);
}
