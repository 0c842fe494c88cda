// The REST body of an inference: JSON (inputs' `data` flat or nested) and the binary tensor
// extension (a JSON header of `Inference-Header-Content-Length` bytes, then each input
// with `parameters.binary_data_size` as raw bytes, in the order of the inputs). Decoding
// checks the request's own consistency (types of fields, sizes against the body); the
// request core then checks it against the model.
#pragma once
#include "serve/infer.hpp"

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::serve {

// A decoded request, with the parsed JSON its typed inputs read from. The binary inputs
// view the body, which must outlive it.
struct decoded_request {
    std::shared_ptr<const nlohmann::json> doc;
    infer_request request;
};

// `header_length`: the Inference-Header-Content-Length header, when given.
decoded_request decode_infer_request(std::string_view body, std::optional<std::size_t> header_length,
                                     const std::string& model, std::optional<std::int64_t> version);

struct encoded_response {
    std::string body;
    std::optional<std::size_t> header_length;  // set when binary outputs follow the JSON
};
encoded_response encode_infer_response(const infer_response& r);

// {"error": "..."}
std::string error_body(const std::string& message);

}  // namespace kiln::serve
