// The request core: what an inference request is once a front end (REST now, gRPC next)
// has decoded it, and how it runs. Everything a request says is checked against the
// model (names, datatypes, ranks, dims, sizes) before any tensor is allocated; a request
// the model cannot take is a serve_error, never a crash.
#pragma once
#include "serve/errors.hpp"
#include "serve/loaded_model.hpp"
#include "serve/model_repository.hpp"

#include <kiln/argument.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::serve {

// An input's values: raw bytes in the tensor's layout (the binary extension, gRPC's raw
// contents) or typed values a front end writes itself (JSON data, gRPC typed contents),
// whose count it states up front so the core can check it before allocating.
struct input_data {
    bool is_raw = false;
    std::string_view raw;  // must stay valid until run() returns
    // When set, `raw` lies in memory this keeps alive (a REST body): where it is 64-byte
    // aligned the tensor aliases it instead of copying it (51 of the 55 us a 602 KB REST
    // request spent outside compute was that copy).
    std::shared_ptr<const char> raw_owner;
    std::size_t count = 0;
    // Writes `count` values, row-major, into the (standard, allocated) tensor.
    std::function<void(const argument& dst)> fill;
};

struct infer_input {
    std::string name;
    std::string datatype;  // "FP32", ...
    std::vector<std::int64_t> shape;
    input_data data;
};

struct output_request {
    std::string name;
    bool binary = false;
};

struct infer_request {
    std::string model;
    std::optional<std::int64_t> version;
    std::string id;
    std::vector<infer_input> inputs;
    std::vector<output_request> outputs;  // empty: every output
    bool binary_outputs = false;          // binary_data_output: the default of outputs not listed
};

struct infer_output {
    std::string name;
    std::string datatype;
    std::vector<std::int64_t> shape;
    argument data;  // standard layout, host memory
    bool binary = false;
};

struct infer_response {
    std::string model;
    std::int64_t version = 0;
    std::string id;
    std::vector<infer_output> outputs;
};

// The element count of `shape`, refusing negative dims and overflow.
std::size_t checked_elements(const std::string& input, const std::vector<std::int64_t>& shape);
// Checks the request against the model: throws serve_error (bad_request) naming the input.
void validate(const loaded_model& m, const infer_request& r);
// validate(), then the tensors, allocated and filled.
param_map make_params(const loaded_model& m, const infer_request& r);
// Runs the request on the model (waiting for a free instance) and records its statistics.
infer_response run(const loaded_model& m, const infer_request& r);
// Finds the model (not_found / unavailable), then run().
infer_response infer(const model_repository& repo, const infer_request& r);

}  // namespace kiln::serve
