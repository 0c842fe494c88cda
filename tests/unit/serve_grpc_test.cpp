// The gRPC front end's conversion (grpc_codec): ModelInferRequest -> the request core's
// infer_request, raw and typed contents, answered in kind; malformed messages refused with
// bad_request (INVALID_ARGUMENT) naming the problem, before any tensor is allocated.
#ifdef KILN_SERVE_GRPC
#include "serve/grpc_codec.hpp"

#include <kiln/module_text.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <random>

using namespace kiln::serve;

namespace {

// out = x + y for x, y: float32[batch 1..8, 3].
std::shared_ptr<loaded_model> add_model() {
    auto p = kiln::parse_program(R"(module main
  x = @param -> float32[{batch=1:8:[1]}, 3]
  y = @param -> float32[{batch=1:8:[1]}, 3]
  @2 = add(x, y) -> float32[{batch=1:8:[1]}, 3]
  @return(@2)
)");
    p.compile(*kiln::get_target("ref"));
    return std::make_shared<loaded_model>("add", 1, std::make_shared<const kiln::program>(std::move(p)), model_config{},
                                          std::make_shared<model_stats>());
}

// out = x + 1 for x: int64[2].
std::shared_ptr<loaded_model> int_model() {
    auto p = kiln::parse_program(R"(module main
  x = @param -> int64[2]
  y = @literal{int64[2] {1, 1}} -> int64[2]
  @2 = add(x, y) -> int64[2]
  @return(@2)
)");
    p.compile(*kiln::get_target("ref"));
    return std::make_shared<loaded_model>("inc", 1, std::make_shared<const kiln::program>(std::move(p)), model_config{},
                                          std::make_shared<model_stats>());
}

std::string raw_floats(const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

inference::ModelInferRequest add_request(std::int64_t rows) {
    inference::ModelInferRequest m;
    m.set_model_name("add");
    m.set_id("r1");
    for (const char* n : {"x", "y"}) {
        auto* in = m.add_inputs();
        in->set_name(n);
        in->set_datatype("FP32");
        in->add_shape(rows);
        in->add_shape(3);
    }
    return m;
}

// Runs the message through the codec and the core; the response message.
inference::ModelInferResponse answer(const loaded_model& model, const inference::ModelInferRequest& m) {
    auto d = decode_grpc_request(m);
    inference::ModelInferResponse out;
    encode_grpc_response(run(model, d.request), d.typed, out);
    return out;
}

// The kind and message of a request that must be refused.
std::pair<error_kind, std::string> refusal(const loaded_model& model, const inference::ModelInferRequest& m) {
    try {
        answer(model, m);
    } catch (const serve_error& e) {
        return {e.kind(), e.what()};
    }
    return {error_kind::internal, "accepted"};
}

}  // namespace

TEST(serve_grpc, raw_contents_in_raw_contents_out) {
    auto model = add_model();
    auto m = add_request(2);
    m.add_raw_input_contents(raw_floats({1, 2, 3, 4, 5, 6}));
    m.add_raw_input_contents(raw_floats({0.5f, 0.5f, 0.5f, 10, 20, 30}));
    auto out = answer(*model, m);
    EXPECT_EQ(out.model_name(), "add");
    EXPECT_EQ(out.model_version(), "1");
    EXPECT_EQ(out.id(), "r1");
    ASSERT_EQ(out.outputs_size(), 1);
    EXPECT_EQ(out.outputs(0).datatype(), "FP32");
    EXPECT_EQ(std::vector<std::int64_t>(out.outputs(0).shape().begin(), out.outputs(0).shape().end()),
              (std::vector<std::int64_t>{2, 3}));
    EXPECT_FALSE(out.outputs(0).has_contents());
    ASSERT_EQ(out.raw_output_contents_size(), 1);
    EXPECT_EQ(out.raw_output_contents(0), raw_floats({1.5f, 2.5f, 3.5f, 14, 25, 36}));
}

TEST(serve_grpc, typed_contents_in_typed_contents_out) {
    auto model = add_model();
    auto m = add_request(1);
    for (float v : {1.f, 2.f, 3.f}) m.mutable_inputs(0)->mutable_contents()->add_fp32_contents(v);
    for (float v : {4.f, 5.f, 6.f}) m.mutable_inputs(1)->mutable_contents()->add_fp32_contents(v);
    auto out = answer(*model, m);
    EXPECT_EQ(out.raw_output_contents_size(), 0);
    ASSERT_EQ(out.outputs_size(), 1);
    const auto& c = out.outputs(0).contents().fp32_contents();
    EXPECT_EQ(std::vector<float>(c.begin(), c.end()), (std::vector<float>{5, 7, 9}));

    auto ints = int_model();
    inference::ModelInferRequest r;
    r.set_model_name("inc");
    auto* in = r.add_inputs();
    in->set_name("x");
    in->set_datatype("INT64");
    in->add_shape(2);
    in->mutable_contents()->add_int64_contents(41);
    in->mutable_contents()->add_int64_contents(-8);
    auto o = answer(*ints, r);
    EXPECT_EQ(o.outputs(0).datatype(), "INT64");
    EXPECT_EQ(std::vector<std::int64_t>(o.outputs(0).contents().int64_contents().begin(),
                                        o.outputs(0).contents().int64_contents().end()),
              (std::vector<std::int64_t>{42, -7}));
}

TEST(serve_grpc, requested_outputs_and_versions) {
    auto model = add_model();
    auto m = add_request(1);
    m.add_raw_input_contents(raw_floats({1, 2, 3}));
    m.add_raw_input_contents(raw_floats({1, 2, 3}));
    m.add_outputs()->set_name("output_0");
    m.set_model_version("1");
    auto d = decode_grpc_request(m);
    EXPECT_EQ(d.request.version, 1);
    ASSERT_EQ(d.request.outputs.size(), 1u);
    EXPECT_EQ(answer(*model, m).raw_output_contents(0), raw_floats({2, 4, 6}));
    m.mutable_outputs(0)->set_name("nope");
    EXPECT_NE(refusal(*model, m).second.find("no output 'nope'"), std::string::npos);
}

TEST(serve_grpc, malformed_requests_are_refused_with_a_reason) {
    auto model = add_model();
    struct bad_case {
        const char* what;
        std::function<void(inference::ModelInferRequest&)> mangle;
        const char* message;
    };
    const std::vector<bad_case> cases = {
        {"no model", [](auto& m) { m.clear_model_name(); }, "model_name is empty"},
        {"bad version", [](auto& m) { m.set_model_version("x1"); }, "not a positive integer"},
        {"version 0", [](auto& m) { m.set_model_version("0"); }, "not a positive integer"},
        {"one raw for two inputs", [](auto& m) { m.mutable_raw_input_contents()->RemoveLast(); }, "1 raw_input_contents for 2"},
        {"raw too short", [](auto& m) { m.mutable_raw_input_contents(1)->resize(11); }, "11 bytes of data"},
        {"raw and typed", [](auto& m) { m.mutable_inputs(0)->mutable_contents()->add_fp32_contents(1); },
         "use one or the other"},
        {"unnamed input", [](auto& m) { m.mutable_inputs(0)->clear_name(); }, "has no name"},
        {"unknown input", [](auto& m) { m.mutable_inputs(0)->set_name("z"); }, "no input 'z'"},
        {"twice", [](auto& m) { m.mutable_inputs(1)->set_name("x"); }, "given twice"},
        {"datatype", [](auto& m) { m.mutable_inputs(0)->set_datatype("FP64"); }, "the model expects FP32"},
        {"unknown datatype", [](auto& m) { m.mutable_inputs(0)->set_datatype("COMPLEX"); }, "unknown datatype"},
        {"rank", [](auto& m) { m.mutable_inputs(0)->add_shape(1); }, "has rank 3"},
        {"negative dim", [](auto& m) { m.mutable_inputs(0)->set_shape(0, -1); }, "negative dimension"},
        {"dim out of range", [](auto& m) { m.mutable_inputs(0)->set_shape(0, 9); }, "dimension 0 is 9"},
        {"huge shape", [](auto& m) {
             m.mutable_inputs(0)->set_shape(0, INT64_MAX);
             m.mutable_inputs(0)->set_shape(1, INT64_MAX);
         }, "too large"},
        {"no outputs name", [](auto& m) { m.add_outputs(); }, "has no name"},
    };
    for (const auto& c : cases) {
        auto m = add_request(1);
        m.add_raw_input_contents(raw_floats({1, 2, 3}));
        m.add_raw_input_contents(raw_floats({1, 2, 3}));
        c.mangle(m);
        auto [kind, message] = refusal(*model, m);
        EXPECT_EQ(kind, error_kind::bad_request) << c.what << ": " << message;
        EXPECT_NE(message.find(c.message), std::string::npos) << c.what << ": " << message;
    }

    // Typed contents: the datatype's own field, and the right count.
    auto typed = [&](auto mangle) {
        auto m = add_request(1);
        for (int i = 0; i < 2; ++i)
            for (float v : {1.f, 2.f, 3.f}) m.mutable_inputs(i)->mutable_contents()->add_fp32_contents(v);
        mangle(m);
        return refusal(*model, m);
    };
    auto r = typed([](auto& m) { m.mutable_inputs(0)->mutable_contents()->add_fp32_contents(4); });
    EXPECT_NE(r.second.find("4 values"), std::string::npos) << r.second;
    r = typed([](auto& m) { m.mutable_inputs(0)->mutable_contents()->add_int_contents(4); });
    EXPECT_NE(r.second.find("fp32_contents"), std::string::npos) << r.second;
    r = typed([](auto& m) {
        m.mutable_inputs(0)->set_datatype("FP16");
    });
    EXPECT_NE(r.second.find("raw_input_contents"), std::string::npos) << r.second;
    EXPECT_EQ(model->stats->success, 0u);
}

TEST(serve_grpc, mangled_messages_are_answered_or_refused) {
    // Random bytes flipped in a serialized request: whatever parses is answered or refused
    // with a serve_error, never a crash or another exception.
    auto model = add_model();
    auto m = add_request(2);
    m.add_raw_input_contents(raw_floats({1, 2, 3, 4, 5, 6}));
    m.add_raw_input_contents(raw_floats({1, 2, 3, 4, 5, 6}));
    const auto wire = m.SerializeAsString();
    std::mt19937 rng(22);
    int parsed = 0;
    for (int i = 0; i < 2000; ++i) {
        auto bytes = wire;
        for (int k = 0; k < 1 + i % 4; ++k) bytes[rng() % bytes.size()] = static_cast<char>(rng());
        inference::ModelInferRequest x;
        if (!x.ParseFromString(bytes)) continue;
        ++parsed;
        try {
            answer(*model, x);
        } catch (const serve_error& e) {
            EXPECT_NE(e.kind(), error_kind::internal) << e.what();
        }
    }
    EXPECT_GT(parsed, 100);
}
#endif
