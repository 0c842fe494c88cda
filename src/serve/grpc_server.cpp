#include "serve/grpc_server.hpp"

#include "serve/datatype.hpp"
#include "serve/grpc_codec.hpp"

#include "grpc_service.grpc.pb.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kiln::serve {

namespace {

grpc::StatusCode code_of(error_kind k) {
    switch (k) {
        case error_kind::bad_request: return grpc::StatusCode::INVALID_ARGUMENT;
        case error_kind::unauthorized: return grpc::StatusCode::UNAUTHENTICATED;
        case error_kind::not_found: return grpc::StatusCode::NOT_FOUND;
        case error_kind::unavailable: return grpc::StatusCode::UNAVAILABLE;
        case error_kind::internal: break;
    }
    return grpc::StatusCode::INTERNAL;
}

// Runs a handler; serve_errors become their status codes, with the message.
template <class F>
grpc::Status guarded(F&& f) {
    try {
        f();
        return grpc::Status::OK;
    } catch (const serve_error& e) {
        return {code_of(e.kind()), e.what()};
    } catch (const std::bad_alloc&) {
        return {grpc::StatusCode::UNAVAILABLE, "out of memory"};
    } catch (const std::exception& e) {
        return {grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what()};
    }
}

void set_duration(inference::StatisticDuration* d, std::uint64_t count, std::uint64_t ns) {
    d->set_count(count);
    d->set_ns(ns);
}

void fill_statistics(const loaded_model& m, inference::ModelStatistics* out) {
    const auto& s = *m.stats;
    auto ok = s.success.load(), execs = s.exec_count.load();
    out->set_name(m.name);
    out->set_version(std::to_string(m.version));
    out->set_last_inference(s.last_inference_ms);
    out->set_inference_count(s.inference_count);
    out->set_execution_count(execs);
    auto* st = out->mutable_inference_stats();
    set_duration(st->mutable_success(), ok, s.success_ns);
    set_duration(st->mutable_fail(), s.failure, s.failure_ns);
    set_duration(st->mutable_queue(), ok, s.queue_ns);
    set_duration(st->mutable_compute_input(), ok, s.compute_input_ns);
    set_duration(st->mutable_compute_infer(), execs, s.compute_infer_ns);
    set_duration(st->mutable_compute_output(), ok, s.compute_output_ns);
}

std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read '" + path + "'");
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

class service final : public inference::GRPCInferenceService::Service {
public:
    service(model_repository& repo, server_state& state) : repo_(repo), state_(state) {}

    grpc::Status ServerLive(grpc::ServerContext*, const inference::ServerLiveRequest*,
                            inference::ServerLiveResponse* out) override {
        return guarded([&] {
            out->set_live(true);
        });
    }
    grpc::Status ServerReady(grpc::ServerContext*, const inference::ServerReadyRequest*,
                             inference::ServerReadyResponse* out) override {
        return guarded([&] {
            out->set_ready(state_.started && !state_.draining && repo_.all_ready());
        });
    }
    grpc::Status ModelReady(grpc::ServerContext*, const inference::ModelReadyRequest* in,
                            inference::ModelReadyResponse* out) override {
        return guarded([&] {
            out->set_ready(!state_.draining && repo_.is_ready(in->name(), parse_version(in->version())));
        });
    }
    grpc::Status ServerMetadata(grpc::ServerContext* ctx, const inference::ServerMetadataRequest*,
                                inference::ServerMetadataResponse* out) override {
        return guarded([&] {
            authorize(ctx);
            out->set_name("kiln");
            out->set_version(KILN_VERSION);
            for (const char* e : {"binary_tensor_data", "model_repository", "statistics"}) out->add_extensions(e);
        });
    }
    grpc::Status ModelMetadata(grpc::ServerContext* ctx, const inference::ModelMetadataRequest* in,
                               inference::ModelMetadataResponse* out) override {
        return guarded([&] {
            authorize(ctx);
            auto m = repo_.find(in->name(), parse_version(in->version()));
            out->set_name(in->name());
            for (auto& e : repo_.index())
                if (e.name == in->name() && !e.version.empty()) out->add_versions(e.version);
            out->set_platform("kiln_" + m->config.target);
            auto put = [](const tensor_spec& t, inference::ModelMetadataResponse::TensorMetadata* md) {
                md->set_name(t.name);
                md->set_datatype(datatype_of(t.element_type));
                for (auto d : t.protocol_shape()) md->add_shape(d);
            };
            for (auto& t : m->inputs) put(t, out->add_inputs());
            for (auto& t : m->outputs) put(t, out->add_outputs());
        });
    }
    grpc::Status ModelInfer(grpc::ServerContext* ctx, const inference::ModelInferRequest* in,
                            inference::ModelInferResponse* out) override {
        state_.in_flight++;
        struct done {
            server_state& s;
            ~done() { s.in_flight--; }
        } guard{state_};
        return guarded([&] {
            authorize(ctx);
            if (state_.draining) fail(error_kind::unavailable, "the server is shutting down");
            auto decoded = decode_grpc_request(*in);
            encode_grpc_response(infer(repo_, decoded.request), decoded.typed, *out);
        });
    }
    grpc::Status ModelStatistics(grpc::ServerContext* ctx, const inference::ModelStatisticsRequest* in,
                                 inference::ModelStatisticsResponse* out) override {
        return guarded([&] {
            authorize(ctx);
            auto version = parse_version(in->version());
            if (in->name().empty()) {
                if (version) fail(error_kind::bad_request, "a version needs a model name");
                for (auto& m : repo_.loaded()) fill_statistics(*m, out->add_model_stats());
            } else if (version) {
                fill_statistics(*repo_.find(in->name(), version), out->add_model_stats());
            } else {
                for (auto& m : repo_.loaded())
                    if (m->name == in->name()) fill_statistics(*m, out->add_model_stats());
                if (out->model_stats_size() == 0) repo_.find(in->name());  // not_found / unavailable
            }
        });
    }
    grpc::Status RepositoryIndex(grpc::ServerContext* ctx, const inference::RepositoryIndexRequest* in,
                                 inference::RepositoryIndexResponse* out) override {
        return guarded([&] {
            authorize(ctx);
            for (auto& e : repo_.index()) {
                if (in->ready() && e.state != "READY") continue;
                auto* m = out->add_models();
                m->set_name(e.name);
                m->set_version(e.version);
                m->set_state(e.state);
                m->set_reason(e.reason);
            }
        });
    }
    grpc::Status RepositoryModelLoad(grpc::ServerContext* ctx, const inference::RepositoryModelLoadRequest* in,
                                     inference::RepositoryModelLoadResponse*) override {
        return guarded([&] {
            authorize(ctx);
            if (state_.draining) fail(error_kind::unavailable, "the server is shutting down");
            repository_api_on();
            if (!in->parameters().empty())
                fail(error_kind::bad_request, "load parameters (a config or files in the request) are not supported");
            repo_.load(in->model_name());
        });
    }
    grpc::Status RepositoryModelUnload(grpc::ServerContext* ctx, const inference::RepositoryModelUnloadRequest* in,
                                       inference::RepositoryModelUnloadResponse*) override {
        return guarded([&] {
            authorize(ctx);
            if (state_.draining) fail(error_kind::unavailable, "the server is shutting down");
            repository_api_on();
            repo_.unload(in->model_name());
        });
    }

private:
    void repository_api_on() const {
        if (!state_.repository_api)
            fail(error_kind::bad_request, "model load and unload are off in --model-control-mode poll");
    }

    // Access control (--auth-token-*): `authorization: Bearer T` or `x-api-key: T` metadata.
    // Health (ServerLive, ServerReady, ModelReady, grpc.health.v1) is exempt, as on REST.
    void authorize(grpc::ServerContext* ctx) const {
        if (!state_.auth.enabled()) return;
        const auto& md = ctx->client_metadata();
        auto value = [&](const char* key) -> std::string_view {
            auto it = md.find(key);
            return it == md.end() ? std::string_view{} : std::string_view(it->second.data(), it->second.size());
        };
        state_.auth.check(value("authorization"), value("x-api-key"));
    }

    model_repository& repo_;
    server_state& state_;
};

}  // namespace

struct grpc_server::impl {
    impl(model_repository& repo, server_state& state, grpc_options o) : svc(repo, state), opts(std::move(o)) {}
    service svc;
    grpc_options opts;
    std::unique_ptr<grpc::Server> server;
};

grpc_server::grpc_server(model_repository& repo, server_state& state, grpc_options o)
    : impl_(std::make_unique<impl>(repo, state, std::move(o))) {}

grpc_server::~grpc_server() { stop(); }

int grpc_server::start(const std::string& host, int port) {
    grpc::EnableDefaultHealthCheckService(true);
    // Server reflection (grpc.reflection.v1alpha), so that grpcurl and grpc_cli list and call
    // the services without the .proto. It serves the schema only, which is public, and like
    // the health service it asks for no token.
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder b;
    std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
    if (!impl_->opts.tls_cert.empty() || !impl_->opts.tls_key.empty()) {
        grpc::SslServerCredentialsOptions ssl;
        try {
            ssl.pem_key_cert_pairs.push_back({read_file(impl_->opts.tls_key), read_file(impl_->opts.tls_cert)});
        } catch (const std::exception& e) {
            std::cerr << "kiln serve: TLS: " << e.what() << "\n";
            return -1;
        }
        creds = grpc::SslServerCredentials(ssl);
    }
    int selected = 0;
    const bool v6 = host.find(':') != std::string::npos;
    b.AddListeningPort((v6 ? "[" + host + "]" : host) + ":" + std::to_string(port), creds, &selected);
    // gRPC sets SO_REUSEPORT by default: a second server would bind the same port and take
    // part of the traffic. A busy port is an error at start instead (as for REST).
    b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    const int limit = static_cast<int>(std::min<std::size_t>(impl_->opts.max_message_bytes, INT32_MAX));
    b.SetMaxReceiveMessageSize(limit);
    b.SetMaxSendMessageSize(limit);
    b.RegisterService(&impl_->svc);
    impl_->server = b.BuildAndStart();
    if (!impl_->server || selected == 0) {
        impl_->server.reset();
        return -1;
    }
    set_serving(false);
    return selected;
}

void grpc_server::set_serving(bool serving) {
    if (!impl_->server) return;
    if (auto* h = impl_->server->GetHealthCheckService()) {
        h->SetServingStatus(inference::GRPCInferenceService::service_full_name(), serving);  // registers the name
        h->SetServingStatus(serving);  // "" and every name registered
    }
}

void grpc_server::stop() {
    if (!impl_->server) return;
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
    impl_->server->Wait();
    impl_->server.reset();
}

}  // namespace kiln::serve
