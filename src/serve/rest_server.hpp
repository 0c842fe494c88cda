// The REST front end of the Open Inference Protocol (KServe v2) over http_server (Boost.Beast):
// its threads call the request core synchronously. Endpoints and errors: docs/server.md.
#pragma once
#include "serve/http_server.hpp"
#include "serve/model_repository.hpp"
#include "serve/server_state.hpp"

#include <string>

namespace kiln::serve {

class rest_server {
public:
    // With tls_cert and tls_key (PEM files): HTTPS (Asio's SSL streams over OpenSSL).
    rest_server(model_repository& repo, server_state& state, std::size_t threads, const std::string& tls_cert = "",
                const std::string& tls_key = "");
    ~rest_server();
    // Binds host:port (0: any free port); returns the port, or -1 when it cannot bind (or
    // the TLS files did not load).
    int bind(const std::string& host, int port);
    // Serves until stop(); stop() lets the requests being answered finish.
    void listen();
    void stop();

private:
    void routes();
    model_repository& repo_;
    server_state& state_;
    http_server http_;
};

}  // namespace kiln::serve
