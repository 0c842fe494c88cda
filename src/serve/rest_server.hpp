// The REST front end of the Open Inference Protocol (KServe v2) over cpp-httplib: a pool
// of threads, each serving one connection at a time (keep-alive), calling the request
// core synchronously. Endpoints and errors: docs/server.md.
#pragma once
#include "serve/model_repository.hpp"
#include "serve/server_state.hpp"

#include <memory>
#include <string>

namespace httplib {
class Server;
}

namespace kiln::serve {

// httplib's default socket options add SO_REUSEPORT, with which a second server binds the
// same port and silently takes part of the traffic: only SO_REUSEADDR (a restart can bind
// while the old connections linger), so a busy port is an error at start.
void exclusive_port(httplib::Server& server);

class rest_server {
public:
    // With tls_cert and tls_key (PEM files): HTTPS (cpp-httplib's SSLServer over OpenSSL).
    rest_server(model_repository& repo, server_state& state, std::size_t threads, const std::string& tls_cert = "",
                const std::string& tls_key = "");
    ~rest_server();
    // Binds host:port (0: any free port); returns the port, or -1 when it cannot bind (or
    // the TLS files did not load).
    int bind(const std::string& host, int port);
    // Serves until stop(); returns after the connections' threads have finished.
    void listen();
    void stop();

private:
    void routes();
    model_repository& repo_;
    server_state& state_;
    std::unique_ptr<httplib::Server> http_;
};

}  // namespace kiln::serve
