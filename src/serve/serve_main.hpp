// `kiln serve`: loads the repository, serves REST, gRPC and metrics until SIGTERM/SIGINT, then
// drains (docs/server.md).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kiln::serve {

struct server_options {
    std::string repository;
    std::string host = "127.0.0.1";  // loopback unless the user opens it up
    int http_port = 8000;
    int grpc_port = 8001;            // -1: no gRPC front end
    std::size_t max_message_mb = 64; // gRPC messages, both ways
    int metrics_port = 8002;         // -1: no metrics endpoint
    int exit_timeout_secs = 30;
    std::size_t http_threads = 64;   // concurrent connections served
    // none: every model loaded at start; explicit: only load_models ("*": all) at start, the
    // rest through the repository API; poll: every model at start, then the folder is
    // rescanned every poll_secs (the repository API's load/unload refused).
    std::string model_control_mode = "none";
    std::vector<std::string> load_models;
    int poll_secs = 15;
    // Access control: the token's source (never the token itself), at most one of the two.
    std::string auth_token_env, auth_token_file;
    const char* auth_token_env_value = nullptr;  // $auth_token_env as the tool read it (src/ reads no environment)
    std::string tls_cert, tls_key;  // gRPC over TLS (PEM files), both or neither
};

// Returns the process exit code: 0 after a drain, 2 when a port cannot be bound or the
// repository is not a folder.
int run_server(const server_options& o);

}  // namespace kiln::serve
