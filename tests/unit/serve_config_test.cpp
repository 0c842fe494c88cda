// config.pbtxt: the supported fields read as Triton writes them; anything else refused
// with a message naming it.
#include "serve/errors.hpp"
#include "serve/model_config.hpp"

#include <gtest/gtest.h>

using namespace kiln::serve;

namespace {
std::string refusal(const std::string& text) {
    try {
        parse_model_config(text, "m");
    } catch (const serve_error& e) {
        EXPECT_EQ(e.http_status(), 400);
        return e.what();
    }
    return "";
}
}  // namespace

TEST(serve_config, reads_the_supported_fields) {
    auto c = parse_model_config(R"(
        name: "m"
        platform: "onnxruntime_onnx"
        max_batch_size: 8
        version_policy: { specific: { versions: [1, 3] } }
        instance_group [ { count: 2 kind: KIND_CPU } ]
        parameters { key: "kiln.threads" value: { string_value: "1" } }
        parameters { key: "kiln.target" value: { string_value: "ref" } }
    )", "m");
    EXPECT_EQ(c.max_batch_size, 8u);
    EXPECT_EQ(c.instance_count, 2u);
    EXPECT_EQ(c.threads, 1u);
    EXPECT_EQ(c.target, "ref");
    EXPECT_EQ(c.policy, version_policy::specific);
    EXPECT_EQ(c.versions, (std::vector<std::int64_t>{1, 3}));
}

TEST(serve_config, defaults_without_fields) {
    auto c = parse_model_config("", "m");
    EXPECT_EQ(c.max_batch_size, 0u);
    EXPECT_EQ(c.instance_count, 1u);
    EXPECT_EQ(c.target, "cpu");
    EXPECT_EQ(c.policy, version_policy::latest);
    EXPECT_EQ(c.latest_count, 1u);
}

TEST(serve_config, refuses_what_it_does_not_support) {
    // A Triton field kiln serve does not implement: refused by name, with its line.
    auto e = refusal("max_batch_size: 4\noptimization { }\n");
    EXPECT_NE(e.find("optimization"), std::string::npos) << e;
    EXPECT_NE(e.find("line 2"), std::string::npos) << e;
    EXPECT_NE(refusal("sequence_batching { }").find("sequence_batching"), std::string::npos);
    EXPECT_NE(refusal("max_batch_size: \"x\"").find("integer"), std::string::npos) << refusal("max_batch_size: \"x\"");
    EXPECT_NE(refusal("name: \"other\"").find("differs"), std::string::npos);
    EXPECT_NE(refusal("platform: \"tensorrt_plan\"").find("tensorrt_plan"), std::string::npos);
    EXPECT_NE(refusal("instance_group [ { kind: KIND_GPU } ]").find("KIND_GPU"), std::string::npos);
    EXPECT_NE(refusal("instance_group [ { count: -1 } ]").find("count"), std::string::npos);
    EXPECT_NE(refusal("parameters { key: \"kiln.fast\" value: { string_value: \"1\" } }").find("kiln.fast"),
              std::string::npos);
    EXPECT_NE(refusal("parameters { key: \"kiln.threads\" value: { string_value: \"two\" } }").find("kiln.threads"),
              std::string::npos);
    EXPECT_NE(refusal("version_policy: { latest: { num_versions: 0 } }").find("num_versions"), std::string::npos);
    EXPECT_NE(refusal("max_batch_size: -1").find("max_batch_size"), std::string::npos);
    EXPECT_NE(refusal("{{{").find("line 1"), std::string::npos);
}

TEST(serve_config, version_policies_select_versions) {
    model_config latest;
    latest.latest_count = 2;
    EXPECT_EQ(select_versions(latest, {3, 1, 2}), (std::vector<std::int64_t>{2, 3}));
    latest.latest_count = 5;
    EXPECT_EQ(select_versions(latest, {3, 1}), (std::vector<std::int64_t>{1, 3}));
    model_config all;
    all.policy = version_policy::all;
    EXPECT_EQ(select_versions(all, {2, 1}), (std::vector<std::int64_t>{1, 2}));
    model_config specific;
    specific.policy = version_policy::specific;
    specific.versions = {1, 7};
    EXPECT_EQ(select_versions(specific, {1, 2, 3}), (std::vector<std::int64_t>{1}));
}

TEST(serve_config, dynamic_batching) {
    auto c = parse_model_config(R"(
        max_batch_size: 8
        dynamic_batching {
          preferred_batch_size: [4, 8]
          max_queue_delay_microseconds: 500
          default_queue_policy { max_queue_size: 64 }
        })", "m");
    EXPECT_TRUE(c.dynamic_batching);
    EXPECT_EQ(c.preferred_batch_sizes, (std::vector<std::size_t>{4, 8}));
    EXPECT_EQ(c.max_queue_delay_us, 500u);
    EXPECT_EQ(c.max_queue_size, 64u);
    EXPECT_NE(refusal("dynamic_batching { }").find("max_batch_size"), std::string::npos);
    EXPECT_NE(refusal("max_batch_size: 4 dynamic_batching { preferred_batch_size: 8 }").find("preferred_batch_size"),
              std::string::npos);
    EXPECT_NE(refusal("max_batch_size: 4 dynamic_batching { priority_levels: 2 }").find("priority_levels"),
              std::string::npos);
}

TEST(serve_config, model_warmup_as_triton_writes_it) {
    auto c = parse_model_config(R"(
        max_batch_size: 8
        model_warmup [
          { name: "zeros" batch_size: 4 count: 3
            inputs { key: "x" value: { data_type: TYPE_FP32 dims: [3] zero_data: true } }
            inputs { key: "y" value: { data_type: TYPE_FP32 dims: [3] random_data: true } } },
          { name: "file" inputs { key: "x" value: { data_type: TYPE_INT64 dims: [3] input_data_file: "x.bin" } } }
        ]
    )", "m");
    ASSERT_EQ(c.warmup.size(), 2u);
    EXPECT_EQ(c.warmup[0].name, "zeros");
    EXPECT_EQ(c.warmup[0].count, 3u);
    ASSERT_EQ(c.warmup[0].inputs.size(), 2u);
    for (auto& in : c.warmup[0].inputs) {
        EXPECT_EQ(in.shape, (std::vector<std::int64_t>{4, 3}));  // batch_size prepended
        EXPECT_EQ(in.datatype, "FP32");
        EXPECT_EQ(in.source, in.name == "x" ? warmup_input::zero : warmup_input::random);
    }
    EXPECT_EQ(c.warmup[1].count, 1u);  // count 0 and batch_size 0 mean 1
    EXPECT_EQ(c.warmup[1].inputs[0].shape, (std::vector<std::int64_t>{1, 3}));
    EXPECT_EQ(c.warmup[1].inputs[0].source, warmup_input::file);
    EXPECT_EQ(c.warmup[1].inputs[0].file_name, "x.bin");

    auto unbatched = parse_model_config(R"(model_warmup { name: "w"
        inputs { key: "x" value: { data_type: TYPE_BOOL dims: [2, 3] zero_data: true } } })", "m");
    EXPECT_EQ(unbatched.warmup[0].inputs[0].shape, (std::vector<std::int64_t>{2, 3}));  // dims as given
    EXPECT_EQ(unbatched.warmup[0].inputs[0].datatype, "BOOL");
}

TEST(serve_config, model_warmup_mistakes_are_named) {
    const std::string x = R"(inputs { key: "x" value: { data_type: TYPE_FP32 dims: [3] zero_data: true } })";
    auto e = refusal("model_warmup { name: \"w\" batch_size: 2 " + x + " }");
    EXPECT_NE(e.find("'w'"), std::string::npos) << e;
    EXPECT_NE(e.find("max_batch_size"), std::string::npos) << e;
    e = refusal("max_batch_size: 2 model_warmup { name: \"w\" batch_size: 4 " + x + " }");
    EXPECT_NE(e.find("exceeds max_batch_size 2"), std::string::npos) << e;
    EXPECT_NE(refusal("model_warmup { " + x + " }").find("no name"), std::string::npos);
    EXPECT_NE(refusal("model_warmup { name: \"w\" }").find("no inputs"), std::string::npos);
    e = refusal(R"(model_warmup { name: "w" inputs { key: "x" value: { data_type: TYPE_STRING zero_data: true } } })");
    EXPECT_NE(e.find("TYPE_STRING"), std::string::npos) << e;
    e = refusal(R"(model_warmup { name: "w" inputs { key: "x" value: { data_type: TYPE_FP32 dims: [-1] zero_data: true } } })");
    EXPECT_NE(e.find("dims must be >= 0"), std::string::npos) << e;
    e = refusal(R"(model_warmup { name: "w" inputs { key: "x" value: { data_type: TYPE_FP32 dims: [3] } } })");
    EXPECT_NE(e.find("zero_data, random_data or input_data_file"), std::string::npos) << e;
    e = refusal(R"(model_warmup { name: "w" inputs { key: "x" value: { data_type: TYPE_FP32 input_data_file: "../x" } } })");
    EXPECT_NE(e.find("warmup/ folder"), std::string::npos) << e;
    EXPECT_NE(refusal("model_warmup { name: \"w\" sample_rate: 3 }").find("sample_rate"), std::string::npos);
}
