#include "serve/rest_server.hpp"

#include "serve/datatype.hpp"
#include "serve/json_codec.hpp"
#include "serve/metrics.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <sys/socket.h>

namespace kiln::serve {

using nlohmann::json;

namespace {

// A request body above this is refused (413) before it is read whole.
constexpr std::size_t max_body_bytes = std::size_t(1) << 30;

void send_json(httplib::Response& res, const json& j, int status = 200) {
    res.status = status;
    res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(error_body(message), "application/json");
}

// Runs a handler; its errors become the documented statuses with {"error": ...}.
template <class F>
void guarded(httplib::Response& res, F&& f) {
    try {
        f();
    } catch (const serve_error& e) {
        send_error(res, e.http_status(), e.what());
    } catch (const std::bad_alloc&) {
        send_error(res, 503, "out of memory");
    } catch (const std::exception& e) {
        send_error(res, 500, std::string("internal error: ") + e.what());
    }
}

// POST bodies are read through a content reader: httplib's own reading would refuse (413)
// a body over 8 KiB whose Content-Type is form-urlencoded, the default of several clients
// (urllib, curl -d). The reader skips that parsing; the 1 GiB limit still applies.
std::string read_body(const httplib::ContentReader& reader) {
    std::string body;
    reader([&](const char* data, std::size_t n) {
        body.append(data, n);
        return true;
    });
    return body;
}

std::optional<std::int64_t> version_of(const httplib::Request& req, std::size_t group) {
    if (req.matches.size() <= group || !req.matches[group].matched) return std::nullopt;
    std::string v = req.matches[group].str();
    if (v.empty() || v.size() > 18 || v.find_first_not_of("0123456789") != std::string::npos || std::stoll(v) < 1)
        fail(error_kind::bad_request, "version '" + v + "' is not a positive integer");
    return std::stoll(v);
}

json tensor_metadata(const tensor_spec& t) {
    return {{"name", t.name}, {"datatype", datatype_of(t.element_type)}, {"shape", t.protocol_shape()}};
}

json model_metadata(const model_repository& repo, const std::string& name, std::optional<std::int64_t> version) {
    auto m = repo.find(name, version);
    json versions = json::array();
    for (auto& e : repo.index())
        if (e.name == name && !e.version.empty()) versions.push_back(e.version);
    json inputs = json::array(), outputs = json::array();
    for (auto& t : m->inputs) inputs.push_back(tensor_metadata(t));
    for (auto& t : m->outputs) outputs.push_back(tensor_metadata(t));
    return {{"name", name}, {"versions", versions}, {"platform", "kiln_" + m->config.target},
            {"inputs", inputs}, {"outputs", outputs}};
}

json duration(std::uint64_t count, std::uint64_t ns) { return {{"count", count}, {"ns", ns}}; }

json model_statistics(const loaded_model& m) {
    const auto& s = *m.stats;
    auto ok = s.success.load(), execs = s.exec_count.load();
    return {{"name", m.name},
            {"version", std::to_string(m.version)},
            {"last_inference", s.last_inference_ms.load()},
            {"inference_count", s.inference_count.load()},
            {"execution_count", execs},
            {"inference_stats",
             {{"success", duration(ok, s.success_ns)},
              {"fail", duration(s.failure, s.failure_ns)},
              {"queue", duration(ok, s.queue_ns)},
              {"compute_input", duration(ok, s.compute_input_ns)},
              {"compute_infer", duration(execs, s.compute_infer_ns)},
              {"compute_output", duration(ok, s.compute_output_ns)}}}};
}

}  // namespace

void exclusive_port(httplib::Server& server) {
    server.set_socket_options([](socket_t sock) {
        int yes = 1;
        ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
}

rest_server::rest_server(model_repository& repo, server_state& state, std::size_t threads, const std::string& tls_cert,
                         const std::string& tls_key)
    : repo_(repo),
      state_(state),
      http_(tls_cert.empty() ? std::make_unique<httplib::Server>()
                             : std::make_unique<httplib::SSLServer>(tls_cert.c_str(), tls_key.c_str())) {
    // Each keep-alive connection holds one of these threads while it is open.
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    http_->set_keep_alive_max_count(1000000);
    http_->set_keep_alive_timeout(2);
    http_->set_tcp_nodelay(true);
    http_->set_payload_max_length(max_body_bytes);
    exclusive_port(*http_);
    routes();
}

rest_server::~rest_server() = default;

int rest_server::bind(const std::string& host, int port) {
    if (!http_->is_valid()) return -1;  // an SSLServer whose certificate or key did not load
    if (port == 0) return http_->bind_to_any_port(host);
    return http_->bind_to_port(host, port) ? port : -1;
}

void rest_server::listen() { http_->listen_after_bind(); }
void rest_server::stop() { http_->stop(); }

void rest_server::routes() {
    auto& http = *http_;
    auto& repo = repo_;
    auto& state = state_;
    // Statuses >= 400 without a body (httplib's own: no route, body too large) get one;
    // the readiness probes answer with an empty body.
    http.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
        bool probe = req.path.ends_with("/ready") || req.path.ends_with("/live");
        if (!res.body.empty() || probe) return httplib::Server::HandlerResponse::Unhandled;
        send_error(res, res.status, res.status == 404 ? "no such endpoint: " + req.method + " " + req.path
                                                      : "request refused (HTTP " + std::to_string(res.status) + ")");
        return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        send_error(res, 500, "internal error");
    });

    // Access control (--auth-token-*): every endpoint but the health ones (the server's live
    // and ready, a model's ready) needs the token; 401 before the body is read or routed.
    http.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
        if (!state.auth.enabled() || req.path == "/v2/health/live" || req.path == "/v2/health/ready" ||
            (req.method == "GET" && req.path.starts_with("/v2/models/") && req.path.ends_with("/ready")))
            return httplib::Server::HandlerResponse::Unhandled;
        auto header = [&](const char* key) { return req.has_header(key) ? req.get_header_value(key) : std::string(); };
        const auto authorization = header("Authorization"), api_key = header("X-API-Key");
        if (state.auth.allows(authorization, api_key)) return httplib::Server::HandlerResponse::Unhandled;
        try {
            state.auth.check(authorization, api_key);
        } catch (const serve_error& e) {
            res.set_header("WWW-Authenticate", "Bearer");
            send_error(res, 401, e.what());
        }
        return httplib::Server::HandlerResponse::Handled;
    });

    http.Get("/v2/health/live", [](const httplib::Request&, httplib::Response& res) { res.status = 200; });
    http.Get("/v2/health/ready", [&](const httplib::Request&, httplib::Response& res) {
        res.status = state.started && !state.draining && repo.all_ready() ? 200 : 400;
    });
    http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)", [&](const httplib::Request& req, httplib::Response& res) {
        guarded(res, [&] { res.status = !state.draining && repo.is_ready(req.matches[1], version_of(req, 2)) ? 200 : 400; });
    });
    http.Get("/v2", [](const httplib::Request&, httplib::Response& res) {
        send_json(res, {{"name", "kiln"},
                        {"version", KILN_VERSION},
                        {"extensions", {"binary_tensor_data", "model_repository", "statistics"}}});
    });
    http.Get("/v2/models/stats", [&](const httplib::Request&, httplib::Response& res) {
        guarded(res, [&] {
            json all = json::array();
            for (auto& m : repo.loaded()) all.push_back(model_statistics(*m));
            send_json(res, {{"model_stats", all}});
        });
    });
    http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/stats)", [&](const httplib::Request& req, httplib::Response& res) {
        guarded(res, [&] {
            auto version = version_of(req, 2);
            json all = json::array();
            if (version) all.push_back(model_statistics(*repo.find(req.matches[1], version)));
            else
                for (auto& m : repo.loaded())
                    if (m->name == req.matches[1]) all.push_back(model_statistics(*m));
            if (all.empty()) repo.find(req.matches[1]);  // not_found / unavailable
            send_json(res, {{"model_stats", all}});
        });
    });
    http.Get(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)", [&](const httplib::Request& req, httplib::Response& res) {
        guarded(res, [&] { send_json(res, model_metadata(repo, req.matches[1], version_of(req, 2))); });
    });
    using reader_type = const httplib::ContentReader&;
    http.Post(R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/infer)", [&](const httplib::Request& req, httplib::Response& res,
                                                                       reader_type reader) {
        const std::string body = read_body(reader);
        state.in_flight++;
        struct done {
            server_state& s;
            ~done() { s.in_flight--; }
        } guard{state};
        guarded(res, [&] {
            if (state.draining) fail(error_kind::unavailable, "the server is shutting down");
            std::optional<std::size_t> header_length;
            if (req.has_header("Inference-Header-Content-Length")) {
                auto text = req.get_header_value("Inference-Header-Content-Length");
                if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
                    fail(error_kind::bad_request, "Inference-Header-Content-Length '" + text + "' is not a size");
                header_length = std::stoull(text);
            }
            auto decoded = decode_infer_request(body, header_length, req.matches[1], version_of(req, 2));
            auto encoded = encode_infer_response(infer(repo, decoded.request));
            if (encoded.header_length) {
                res.set_header("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
                res.set_content(std::move(encoded.body), "application/octet-stream");
            } else {
                res.set_content(std::move(encoded.body), "application/json");
            }
        });
    });
    http.Post("/v2/repository/index", [&](const httplib::Request&, httplib::Response& res, reader_type reader) {
        const std::string body = read_body(reader);
        guarded(res, [&] {
            bool ready_only = false;
            if (!body.empty()) {
                auto j = json::parse(body, nullptr, false);
                if (j.is_discarded() || !j.is_object()) fail(error_kind::bad_request, "the request must be a JSON object");
                if (auto it = j.find("ready"); it != j.end()) {
                    if (!it->is_boolean()) fail(error_kind::bad_request, "'ready' must be true or false");
                    ready_only = it->get<bool>();
                }
            }
            json out = json::array();
            for (auto& e : repo.index()) {
                if (ready_only && e.state != "READY") continue;
                json j = {{"name", e.name}, {"state", e.state}};
                if (!e.version.empty()) j["version"] = e.version;
                if (!e.reason.empty()) j["reason"] = e.reason;
                out.push_back(std::move(j));
            }
            send_json(res, out);
        });
    });
    http.Post(R"(/v2/repository/models/([^/]+)/(load|unload))", [&](const httplib::Request& req, httplib::Response& res,
                                                                     reader_type reader) {
        read_body(reader);  // parameters (a config override) are not supported yet
        guarded(res, [&] {
            if (state.draining) fail(error_kind::unavailable, "the server is shutting down");
            if (!state.repository_api)
                fail(error_kind::bad_request, "model load and unload are off in --model-control-mode poll");
            if (req.matches[2] == "load") repo.load(req.matches[1]);
            else repo.unload(req.matches[1]);
            send_json(res, json::object());
        });
    });
}

}  // namespace kiln::serve
