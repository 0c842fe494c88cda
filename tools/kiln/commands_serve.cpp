// kiln serve: the Open Inference Protocol server of src/serve.
#include "commands.hpp"

#include "serve/serve_main.hpp"

#include <cstdlib>

namespace kiln::cli {

int cmd_serve(const options& o) {
    serve::server_options s;
    s.repository = o.model_repository;
    s.host = o.host;
    s.http_port = o.http_port;
    s.grpc_port = o.grpc_port;
    s.max_message_mb = o.max_message_mb;
    s.model_control_mode = o.model_control_mode;
    s.load_models = o.load_models;
    s.poll_secs = o.repository_poll_secs;
    s.auth_token_env = o.auth_token_env;
    if (!o.auth_token_env.empty()) s.auth_token_env_value = std::getenv(o.auth_token_env.c_str());
    s.auth_token_file = o.auth_token_file;
    s.tls_cert = o.tls_cert;
    s.tls_key = o.tls_key;
    s.metrics_port = o.metrics_port;
    s.exit_timeout_secs = o.exit_timeout_secs;
    s.http_threads = o.http_threads;
    return serve::run_server(s);
}

}  // namespace kiln::cli
