#include "serve/rest_server.hpp"

#include "serve/datatype.hpp"
#include "serve/json_codec.hpp"
#include "serve/metrics.hpp"

#include <nlohmann/json.hpp>

namespace kiln::serve {

using nlohmann::json;

namespace {

void send_json(http_response& res, const json& j, int status = 200) {
    res.status = status;
    res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(http_response& res, int status, const std::string& message) {
    res.status = status;
    res.set_content(error_body(message), "application/json");
}

// Runs a handler; its errors become the documented statuses with {"error": ...}.
template <class F>
void guarded(http_response& res, F&& f) {
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

// The binary extension's Inference-Header-Content-Length, when given.
std::optional<std::size_t> header_length_of(const http_request& req) {
    auto text = req.header("Inference-Header-Content-Length");
    if (!text) return std::nullopt;
    if (text->empty() || text->size() > 18 || text->find_first_not_of("0123456789") != std::string::npos)
        fail(error_kind::bad_request, "Inference-Header-Content-Length '" + *text + "' is not a size");
    return std::stoull(*text);
}

std::optional<std::int64_t> version_of(const http_request& req, std::size_t group) {
    if (!req.has_group(group)) return std::nullopt;
    std::string v = req.group(group);
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

http_options rest_options(std::size_t threads, const std::string& tls_cert, const std::string& tls_key) {
    http_options o;
    o.threads = threads;
    o.tls_cert = tls_cert;
    o.tls_key = tls_key;
    return o;
}

}  // namespace

rest_server::rest_server(model_repository& repo, server_state& state, std::size_t threads, const std::string& tls_cert,
                         const std::string& tls_key)
    : repo_(repo), state_(state), http_(rest_options(threads, tls_cert, tls_key)) {
    routes();
}

rest_server::~rest_server() = default;

int rest_server::bind(const std::string& host, int port) { return http_.bind(host, port); }
void rest_server::listen() { http_.listen(); }
void rest_server::stop() { http_.stop(); }

void rest_server::routes() {
    auto& repo = repo_;
    auto& state = state_;
    // Refusals without a body (the server's own: no route, body too large, malformed) get
    // one; the readiness probes answer with an empty body.
    http_.set_error_handler([](const http_request& req, http_response& res) {
        bool probe = req.path.ends_with("/ready") || req.path.ends_with("/live");
        if (!res.body.empty() || (probe && res.status != 500)) return;
        send_error(res, res.status,
                   res.status == 404   ? "no such endpoint: " + req.method + " " + req.path
                   : res.status == 500 ? std::string("internal error")
                                       : "request refused (HTTP " + std::to_string(res.status) + ")");
    });

    // Access control (--auth-token-*): every endpoint but the health ones (the server's live
    // and ready, a model's ready) needs the token; 401 before the body is read or routed.
    http_.set_before_body([&](const http_request& req, http_response& res) {
        if (!state.auth.enabled() || req.path == "/v2/health/live" || req.path == "/v2/health/ready" ||
            (req.method == "GET" && req.path.starts_with("/v2/models/") && req.path.ends_with("/ready")))
            return false;
        const auto authorization = req.header("Authorization").value_or(""), api_key = req.header("X-API-Key").value_or("");
        if (state.auth.allows(authorization, api_key)) return false;
        try {
            state.auth.check(authorization, api_key);
        } catch (const serve_error& e) {
            res.headers.emplace_back("WWW-Authenticate", "Bearer");
            send_error(res, 401, e.what());
        }
        return true;
    });

    // A binary request's tensors follow its JSON header: the first lands 64-byte aligned, and
    // so do the next where the sizes before them are multiples of 64 (then used in place).
    http_.set_body_alignment([](const http_request& req) { return header_length_of(req).value_or(0); });

    http_.route("GET", "/v2/health/live", [](const http_request&, http_response& res) { res.status = 200; });
    http_.route("GET", "/v2/health/ready", [&](const http_request&, http_response& res) {
        res.status = state.started && !state.draining && repo.all_ready() ? 200 : 400;
    });
    http_.route("GET", R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/ready)", [&](const http_request& req, http_response& res) {
        guarded(res, [&] { res.status = !state.draining && repo.is_ready(req.group(1), version_of(req, 2)) ? 200 : 400; });
    });
    http_.route("GET", "/v2", [](const http_request&, http_response& res) {
        send_json(res, {{"name", "kiln"},
                        {"version", KILN_VERSION},
                        {"extensions", {"binary_tensor_data", "model_repository", "statistics"}}});
    });
    http_.route("GET", "/v2/models/stats", [&](const http_request&, http_response& res) {
        guarded(res, [&] {
            json all = json::array();
            for (auto& m : repo.loaded()) all.push_back(model_statistics(*m));
            send_json(res, {{"model_stats", all}});
        });
    });
    http_.route("GET", R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/stats)", [&](const http_request& req, http_response& res) {
        guarded(res, [&] {
            auto version = version_of(req, 2);
            const auto name = req.group(1);
            json all = json::array();
            if (version) all.push_back(model_statistics(*repo.find(name, version)));
            else
                for (auto& m : repo.loaded())
                    if (m->name == name) all.push_back(model_statistics(*m));
            if (all.empty()) repo.find(name);  // not_found / unavailable
            send_json(res, {{"model_stats", all}});
        });
    });
    http_.route("GET", R"(/v2/models/([^/]+)(?:/versions/([^/]+))?)", [&](const http_request& req, http_response& res) {
        guarded(res, [&] { send_json(res, model_metadata(repo, req.group(1), version_of(req, 2))); });
    });
    http_.route("POST", R"(/v2/models/([^/]+)(?:/versions/([^/]+))?/infer)", [&](const http_request& req, http_response& res) {
        state.in_flight++;
        struct done {
            server_state& s;
            ~done() { s.in_flight--; }
        } guard{state};
        guarded(res, [&] {
            if (state.draining) fail(error_kind::unavailable, "the server is shutting down");
            auto decoded = decode_infer_request(req.body, header_length_of(req), req.group(1), version_of(req, 2));
            for (auto& in : decoded.request.inputs)
                if (in.data.is_raw) in.data.raw_owner = req.body_storage;  // binary data, in the body
            auto encoded = encode_infer_response(infer(repo, decoded.request));
            if (encoded.header_length) {
                res.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*encoded.header_length));
                res.set_content(std::move(encoded.body), "application/octet-stream");
            } else {
                res.set_content(std::move(encoded.body), "application/json");
            }
        });
    });
    http_.route("POST", "/v2/repository/index", [&](const http_request& req, http_response& res) {
        guarded(res, [&] {
            bool ready_only = false;
            if (!req.body.empty()) {
                auto j = json::parse(req.body, nullptr, false);
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
    // A load request's parameters (a config override) are not supported yet: its body is ignored.
    http_.route("POST", R"(/v2/repository/models/([^/]+)/(load|unload))", [&](const http_request& req, http_response& res) {
        guarded(res, [&] {
            if (state.draining) fail(error_kind::unavailable, "the server is shutting down");
            if (!state.repository_api)
                fail(error_kind::bad_request, "model load and unload are off in --model-control-mode poll");
            if (req.group(2) == "load") repo.load(req.group(1));
            else repo.unload(req.group(1));
            send_json(res, json::object());
        });
    });
}

}  // namespace kiln::serve
