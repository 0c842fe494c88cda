// kiln_grpc_bench's command line (see --help in options.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace kiln_grpc_bench {

struct input_file {
    std::string name;  // the model's input name, as the request's InferInputTensor.name
    std::string path;  // an ONNX TensorProto file (input_N.pb)
};

struct options {
    std::string host = "127.0.0.1";
    int port = 8001;
    std::string model;
    std::string version;  // empty: the server's policy picks
    std::vector<input_file> inputs;
    int n = 200;      // measured requests per client
    int warmup = 10;  // untimed requests per client before the measured ones
    int clients = 1;  // threads, each with its own channel (its own connection)
    bool json = false;
};

// nullopt after printing --help; throws std::invalid_argument with a message for bad usage.
std::optional<options> parse_options(int argc, char** argv);

}  // namespace kiln_grpc_bench
