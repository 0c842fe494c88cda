// The gRPC front end of the Open Inference Protocol: inference.GRPCInferenceService
// (grpc_service.proto) over gRPC's synchronous server, calling the same request core as
// REST, and grpc.health.v1.Health (gRPC's default health service) for Kubernetes probes.
#pragma once
#include "serve/model_repository.hpp"
#include "serve/server_state.hpp"

#include <memory>
#include <string>

namespace kiln::serve {

struct grpc_options {
    std::size_t max_message_bytes = std::size_t(64) << 20;  // both ways
    std::string tls_cert, tls_key;                          // PEM files; both empty: plain text
};

class grpc_server {
public:
    grpc_server(model_repository& repo, server_state& state, grpc_options o);
    ~grpc_server();
    // Binds host:port (0: any free port) and starts serving; returns the port, or -1 when it
    // cannot bind (or read the TLS files).
    int start(const std::string& host, int port);
    // grpc.health.v1: SERVING or NOT_SERVING for every service (and the server's "").
    void set_serving(bool serving);
    // Stops accepting calls, waits (up to a second) for those running, and returns.
    void stop();

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace kiln::serve
