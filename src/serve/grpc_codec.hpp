// The gRPC front end's messages (inference.ModelInferRequest / ModelInferResponse, from
// grpc_service.proto) and the request core's infer_request / infer_response, both ways.
// Protobuf only, no gRPC: the unit tests convert without a server.
#pragma once
#include "serve/infer.hpp"

#include "grpc_service.pb.h"

namespace kiln::serve {

// A decoded request points into the message (raw_input_contents, typed contents): the
// message must outlive it. Throws serve_error (bad_request) for what the message itself
// gets wrong (no model name, a version that is not a number, raw contents that do not pair
// with the inputs, contents in a field other than the datatype's); the core checks the rest
// against the model before anything is allocated.
struct grpc_decoded {
    infer_request request;
    // The inputs came as typed contents: the response answers in kind (typed contents),
    // unless an output's datatype only travels raw (FP16, BF16).
    bool typed = false;
};
grpc_decoded decode_grpc_request(const inference::ModelInferRequest& m);

// The response as raw_output_contents (typed = false) or typed contents.
void encode_grpc_response(const infer_response& r, bool typed, inference::ModelInferResponse& out);

// "" (none) or a positive integer; bad_request otherwise.
std::optional<std::int64_t> parse_version(const std::string& v);

}  // namespace kiln::serve
