// What the serve fuzzer does with one input, shared with the unit test that replays its
// findings: the bytes are one inference request as a front end receives it, decoded,
// checked against a small model, run and encoded back, as `kiln serve` does.
//
// The first byte picks the form and the model (low 2 bits: 0 REST JSON, 1 REST binary
// extension whose next 4 bytes are the Inference-Header-Content-Length, little endian,
// 2 and 3 a serialized gRPC ModelInferRequest; bit 2: the model). The rest is the body.
// A serve_error that is not a 500 is the expected outcome for a bad request; a 500 (a
// Kiln bug by the server's contract) or any other exception propagates: a finding.
#pragma once
#include "serve/grpc_codec.hpp"
#include "serve/json_codec.hpp"

#include <kiln/allocation_limit.hpp>
#include <kiln/module_text.hpp>
#include <kiln/target.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::fuzz {

// "add": x + y, float32[batch 1..8, 3] (batched, max_batch_size 8); "mixed": one input of
// each kind the protocol carries differently (int64, a dynamic float16, bool, uint8).
inline const std::vector<std::shared_ptr<serve::loaded_model>>& serve_models() {
    static const auto models = [] {
        auto make = [](const std::string& name, const std::string& text, std::size_t max_batch) {
            auto p = parse_program(text);
            p.compile(*get_target("ref"));
            serve::model_config c;
            c.max_batch_size = max_batch;
            return std::make_shared<serve::loaded_model>(name, 1, std::make_shared<const program>(std::move(p)), c,
                                                         std::make_shared<serve::model_stats>());
        };
        return std::vector<std::shared_ptr<serve::loaded_model>>{
            make("add", R"(module main
  x = @param -> float32[{batch=1:8:[1]}, 3]
  y = @param -> float32[{batch=1:8:[1]}, 3]
  @2 = add(x, y) -> float32[{batch=1:8:[1]}, 3]
  @return(@2)
)", 8),
            make("mixed", R"(module main
  i = @param -> int64[2]
  h = @param -> float16[{n=0:16:[1]}, 2]
  b = @param -> bool[3]
  u = @param -> uint8[2, 2]
  @4 = add(i, i) -> int64[2]
  @5 = add(h, h) -> float16[{n=0:16:[1]}, 2]
  @6 = logical_not(b) -> bool[3]
  @7 = add(u, u) -> uint8[2, 2]
  @return(@4, @5, @6, @7)
)", 0)};
    }();
    return models;
}

// Runs one input; true when the request was answered, false when refused.
inline bool run_serve_bytes(const std::uint8_t* data, std::size_t size) {
    if (size == 0) return false;
    const auto& models = serve_models();
    const auto& m = *models[(data[0] >> 2) % models.size()];
    const int form = data[0] & 3;
    std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
    allocation_limit cap(std::size_t{64} << 20);  // a request may claim a huge shape: it must be refused first
    try {
        if (form == 0 || form == 1) {
            std::optional<std::size_t> header_length;
            if (form == 1) {
                if (body.size() < 4) return false;
                std::uint32_t n = 0;
                std::memcpy(&n, body.data(), 4);
                header_length = n;
                body.remove_prefix(4);
            }
            auto d = serve::decode_infer_request(body, header_length, m.name, std::nullopt);
            serve::encode_infer_response(serve::run(m, d.request));
        } else {
            inference::ModelInferRequest msg;
            if (!msg.ParseFromArray(body.data(), static_cast<int>(body.size()))) return false;
            auto d = serve::decode_grpc_request(msg);
            d.request.model = m.name;  // whichever model it names, fuzz this one
            inference::ModelInferResponse out;
            serve::encode_grpc_response(serve::run(m, d.request), d.typed, out);
        }
        return true;
    } catch (const serve::serve_error& e) {
        if (e.kind() == serve::error_kind::internal) throw std::logic_error(std::string("500: ") + e.what());
        return false;
    }
}

}  // namespace kiln::fuzz
