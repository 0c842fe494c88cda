// The REST decoder and the request core: good requests (JSON flat and nested, binary in
// and out) answered with the right numbers; malformed ones refused with 400 (or 404) and
// a message naming the problem, before any tensor is allocated.
#include "serve/json_codec.hpp"

#include <kiln/module_text.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <random>

using namespace kiln::serve;

namespace {

// out = x + y for x, y: float32[batch 1..8, 3].
std::shared_ptr<loaded_model> add_model(model_config c = {}) {
    auto p = kiln::parse_program(R"(module main
  x = @param -> float32[{batch=1:8:[1]}, 3]
  y = @param -> float32[{batch=1:8:[1]}, 3]
  @2 = add(x, y) -> float32[{batch=1:8:[1]}, 3]
  @return(@2)
)");
    p.compile(*kiln::get_target("ref"));
    return std::make_shared<loaded_model>("add", 1, std::make_shared<const kiln::program>(std::move(p)), c,
                                          std::make_shared<model_stats>());
}

infer_response run_json(const loaded_model& m, const std::string& body) {
    auto d = decode_infer_request(body, std::nullopt, "add", std::nullopt);
    return run(m, d.request);
}

// The status and message of a request that must be refused.
std::pair<int, std::string> refusal(const loaded_model& m, const std::string& body,
                                    std::optional<std::size_t> header_length = std::nullopt) {
    try {
        auto d = decode_infer_request(body, header_length, "add", std::nullopt);
        run(m, d.request);
    } catch (const serve_error& e) {
        return {e.http_status(), e.what()};
    }
    return {200, ""};
}

std::string raw_floats(const std::vector<float>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

}  // namespace

TEST(serve_request, json_flat_and_nested_data) {
    auto m = add_model();
    auto r = run_json(*m, R"({"id": "a1", "inputs": [
        {"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]},
        {"name": "y", "shape": [2, 3], "datatype": "FP32", "data": [[0.5, 0.5, 0.5], [10, 20, 30]]}]})");
    ASSERT_EQ(r.outputs.size(), 1u);
    EXPECT_EQ(r.id, "a1");
    EXPECT_EQ(r.outputs[0].datatype, "FP32");
    EXPECT_EQ(r.outputs[0].shape, (std::vector<std::int64_t>{2, 3}));
    EXPECT_EQ(r.outputs[0].data.to_vector<float>(), (std::vector<float>{1.5f, 2.5f, 3.5f, 14, 25, 36}));
    EXPECT_EQ(m->stats->success, 1u);
    EXPECT_EQ(m->stats->exec_count, 1u);

    auto j = nlohmann::json::parse(encode_infer_response(r).body);
    EXPECT_EQ(j["model_name"], "add");
    EXPECT_EQ(j["model_version"], "1");
    EXPECT_EQ(j["outputs"][0]["data"][5].get<double>(), 36.0);
}

TEST(serve_request, binary_inputs_and_outputs) {
    auto m = add_model();
    std::string header = R"({"inputs": [
        {"name": "x", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": 12}},
        {"name": "y", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": 12}}],
        "outputs": [{"name": "output_0", "parameters": {"binary_data": true}}]})";
    std::string body = header + raw_floats({1, 2, 3}) + raw_floats({4, 5, 6});
    auto d = decode_infer_request(body, header.size(), "add", std::nullopt);
    auto e = encode_infer_response(run(*m, d.request));
    ASSERT_TRUE(e.header_length);
    auto j = nlohmann::json::parse(e.body.substr(0, *e.header_length));
    EXPECT_EQ(j["outputs"][0]["parameters"]["binary_data_size"], 12);
    EXPECT_FALSE(j["outputs"][0].contains("data"));
    EXPECT_EQ(e.body.substr(*e.header_length), raw_floats({5, 7, 9}));
}

TEST(serve_request, malformed_requests_are_refused_with_a_reason) {
    auto m = add_model();
    const std::string y = R"({"name": "y", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]})";
    auto with_x = [&](const std::string& x) { return R"({"inputs": [)" + x + ", " + y + "]}"; };
    struct bad_case {
        std::string body, says;
    };
    const std::vector<bad_case> cases = {
        {"{\"inputs\": [", "not valid JSON"},
        {"[1, 2]", "JSON object"},
        {"{}", "'inputs'"},
        {R"({"inputs": {}})", "'inputs'"},
        {with_x(R"({"name": "x", "shape": [1, 3], "datatype": "FP64", "data": [1, 2, 3]})"), "FP64"},
        {with_x(R"({"name": "x", "shape": [1, 3], "datatype": "FLOAT", "data": [1, 2, 3]})"), "unknown datatype"},
        {with_x(R"({"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2]})"), "2 values"},
        {with_x(R"({"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, "2", 3]})"), "string"},
        {with_x(R"({"name": "x", "shape": [1, 3], "datatype": "FP32"})"), "no data"},
        {with_x(R"({"name": "x", "shape": [-1, 3], "datatype": "FP32", "data": [1, 2, 3]})"), "negative"},
        {with_x(R"({"name": "x", "shape": [1, 1.5], "datatype": "FP32", "data": [1, 2, 3]})"), "integers"},
        {with_x(R"({"name": "x", "shape": [3], "datatype": "FP32", "data": [1, 2, 3]})"), "rank"},
        {with_x(R"({"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]})"), "dimension 1"},
        {with_x(R"({"name": "x", "shape": [9, 3], "datatype": "FP32", "data": [1, 2, 3]})"), "1 to 8"},
        // Huge dims: refused from the numbers, nothing of that size is allocated.
        {with_x(R"({"name": "x", "shape": [4611686018427387904, 4611686018427387904], "datatype": "FP32", "data": [1]})"),
         "too large"},
        {with_x(R"({"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}, )" + y), "twice"},
        {with_x(R"({"name": "z", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]})"), "no input 'z'"},
        {R"({"inputs": [)" + y + "]}", "'x' is missing"},
        {with_x(R"({"name": 5, "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]})"), "'name'"},
        {R"({"inputs": [)" + y + R"(, {"name": "x", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}],
            "outputs": [{"name": "nope"}]})", "no output 'nope'"},
        {with_x(R"({"name": "x", "shape": [1, 3], "datatype": "FP32", "data": )" + std::string(100, '[') + "1" +
                std::string(100, ']') + "}"),
         "nested too deeply"},
    };
    for (auto& c : cases) {
        auto [status, message] = refusal(*m, c.body);
        EXPECT_EQ(status, 400) << c.body;
        EXPECT_NE(message.find(c.says), std::string::npos) << c.body << "\n -> " << message;
    }
    EXPECT_EQ(m->stats->success, 0u);
}

TEST(serve_request, binary_sizes_must_match_the_body_and_the_shape) {
    auto m = add_model();
    auto header = [](int x_size) {
        return R"({"inputs": [
            {"name": "x", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": )" +
               std::to_string(x_size) + R"(}},
            {"name": "y", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]})";
    };
    // 12 bytes declared, 8 sent: runs past the body.
    auto h = header(12);
    auto r = refusal(*m, h + std::string(8, '\0'), h.size());
    EXPECT_EQ(r.first, 400);
    EXPECT_NE(r.second.find("runs past"), std::string::npos) << r.second;
    // 8 declared and sent, the shape needs 12.
    h = header(8);
    r = refusal(*m, h + std::string(8, '\0'), h.size());
    EXPECT_NE(r.second.find("needs 12"), std::string::npos) << r.second;
    // Bytes left over.
    h = header(12);
    r = refusal(*m, h + std::string(16, '\0'), h.size());
    EXPECT_NE(r.second.find("4 bytes of binary data after"), std::string::npos) << r.second;
    // The header length beyond the body.
    r = refusal(*m, h, h.size() + 1);
    EXPECT_NE(r.second.find("exceeds the body"), std::string::npos) << r.second;
    // A negative size.
    h = header(-12);
    r = refusal(*m, h + std::string(12, '\0'), h.size());
    EXPECT_NE(r.second.find("non-negative"), std::string::npos) << r.second;
}

TEST(serve_request, max_batch_size_bounds_dim_0) {
    model_config c;
    c.max_batch_size = 2;
    auto m = add_model(c);
    auto body = [](int batch) {
        std::string data = "[" + std::string("1") + std::string(static_cast<std::size_t>(batch * 3 - 1) * 0, ' ');
        for (int i = 1; i < batch * 3; ++i) data += ", 1";
        data += "]";
        std::string shape = "[" + std::to_string(batch) + ", 3]";
        return R"({"inputs": [{"name": "x", "shape": )" + shape + R"(, "datatype": "FP32", "data": )" + data +
               R"(}, {"name": "y", "shape": )" + shape + R"(, "datatype": "FP32", "data": )" + data + "}]}";
    };
    EXPECT_EQ(run_json(*m, body(2)).outputs[0].data.to_vector<float>(), std::vector<float>(6, 2.0f));
    EXPECT_EQ(m->stats->inference_count, 2u);  // a batch of 2 counts 2
    auto r = refusal(*m, body(3));
    EXPECT_NE(r.second.find("max_batch_size 2"), std::string::npos) << r.second;
}

// Random edits of valid requests (JSON and binary) are answered or refused with a
// serve_error, never a crash or another exception.
TEST(serve_request, mangled_requests_are_answered_or_refused) {
    auto m = add_model();
    const std::string json_body = R"({"id": "q", "inputs": [
        {"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]},
        {"name": "y", "shape": [2, 3], "datatype": "FP32", "data": [[0.5, 0.5, 0.5], [10, 20, 30]]}],
        "outputs": [{"name": "output_0", "parameters": {"binary_data": true}}]})";
    const std::string header = R"({"inputs": [
        {"name": "x", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": 12}},
        {"name": "y", "shape": [1, 3], "datatype": "FP32", "parameters": {"binary_data_size": 12}}]})";
    const std::string binary_body = header + raw_floats({1, 2, 3}) + raw_floats({4, 5, 6});
    const std::string alphabet = "{}[]\":,-0123456789.eE truefalsnul\\x";
    std::mt19937 gen(22);
    std::size_t answered = 0, refused = 0;
    for (int trial = 0; trial < 4000; ++trial) {
        const bool binary = trial % 2;
        std::string body = binary ? binary_body : json_body;
        for (int edits = 1 + static_cast<int>(gen() % 3); edits > 0; --edits) {
            std::size_t at = gen() % body.size();
            switch (gen() % 3) {
                case 0: body.erase(at, 1 + gen() % 6); break;
                case 1: body.insert(at, 1, alphabet[gen() % alphabet.size()]); break;
                default: body[at] = alphabet[gen() % alphabet.size()]; break;
            }
        }
        std::optional<std::size_t> length;
        if (binary) length = std::min(body.size(), header.size() + (gen() % 3) - 1);
        try {
            auto d = decode_infer_request(body, length, "add", std::nullopt);
            encode_infer_response(run(*m, d.request));
            ++answered;
        } catch (const serve_error& e) {
            EXPECT_NE(e.http_status(), 500) << e.what() << "\n" << body;
            ++refused;
        }
    }
    EXPECT_GT(answered, 0u);
    EXPECT_GT(refused, 1000u);
}

TEST(serve_request, binary_bool_data_must_be_0_or_1) {
    // Found by the serve fuzzer: a BOOL byte other than 0 or 1 was undefined behaviour in
    // the kernel and the response. Raw data (REST binary, gRPC raw contents) is checked.
    auto p = kiln::parse_program(R"(module main
  b = @param -> bool[3]
  @1 = logical_not(b) -> bool[3]
  @return(@1)
)");
    p.compile(*kiln::get_target("ref"));
    loaded_model m("not", 1, std::make_shared<const kiln::program>(std::move(p)), {}, std::make_shared<model_stats>());
    const std::string h = R"({"inputs": [{"name": "b", "shape": [3], "datatype": "BOOL", "parameters": {"binary_data_size": 3}}]})";
    auto refused = refusal(m, h + std::string("\1\2\0", 3), h.size());
    EXPECT_EQ(refused.first, 400);
    EXPECT_NE(refused.second.find("input 'b': BOOL data must be bytes 0 or 1, byte 1 is 2"), std::string::npos)
        << refused.second;
    auto d = decode_infer_request(h + std::string("\1\0\1", 3), h.size(), "not", std::nullopt);
    auto out = run(m, d.request).outputs.at(0).data;
    EXPECT_EQ(out.to_vector<int>(), (std::vector<int>{0, 1, 0}));
}
