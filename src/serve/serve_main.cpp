#include "serve/serve_main.hpp"

#include "serve/http_server.hpp"
#include "serve/metrics.hpp"
#ifdef KILN_SERVE_GRPC
#include "serve/grpc_server.hpp"
#endif
#include "serve/model_repository.hpp"
#include "serve/rest_server.hpp"
#include "serve/server_state.hpp"

#include <google/protobuf/stubs/logging.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <thread>

#include <malloc.h>
#include <pthread.h>

namespace kiln::serve {

namespace {

// SIGTERM and SIGINT are blocked in every thread (the server's threads inherit the mask
// from here) and taken synchronously by the main thread with sigwait: no handler runs
// in the middle of a request, and the drain is ordinary code.
sigset_t shutdown_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    return set;
}

}  // namespace

int run_server(const server_options& o) {
    if (!std::filesystem::is_directory(o.repository)) {
        std::cerr << "kiln serve: --model-repository '" << o.repository << "' is not a folder\n";
        return 2;
    }
    // glibc gives threads their own malloc arenas (up to 8 per core), and memory freed in
    // one stays there: with the HTTP threads and the loads spread over arenas, 100
    // unload/load cycles of mobilenet_v2 grew RSS from 93 to 409 MiB. Even with two, a
    // version freed in the second arena stayed resident (malloc_trim releases the main
    // arena's top but not another's), and the next load, from a thread of the main arena,
    // took 27 MB of fresh pages: RSS alternated between 77 and 105 MiB. One arena: the
    // server's own allocations are few per request (the work is in the kernels), and a
    // freed version goes back to the system (loaded models trim where they are freed).
    // Set before any thread starts.
    mallopt(M_ARENA_MAX, 1);
    // protobuf logs an ERROR line for each string field of a gRPC message that is not UTF-8
    // (the serve fuzzer's log: 120,426 of them), so clients could fill the server's log; the
    // request is refused all the same. Its fatal messages still abort as before.
    google::protobuf::SetLogHandler([](google::protobuf::LogLevel level, const char* file, int line,
                                       const std::string& message) {
        if (level >= google::protobuf::LOGLEVEL_FATAL)
            std::cerr << "libprotobuf FATAL " << file << ":" << line << "] " << message << "\n";
    });
    auto signals = shutdown_signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);

    if (o.model_control_mode != "none" && o.model_control_mode != "explicit" && o.model_control_mode != "poll") {
        std::cerr << "kiln serve: --model-control-mode must be none, explicit or poll\n";
        return 2;
    }
    if (!o.load_models.empty() && o.model_control_mode != "explicit") {
        std::cerr << "kiln serve: --load-model needs --model-control-mode explicit\n";
        return 2;
    }
    model_repository repo(o.repository);
    server_state state;
    state.repository_api = o.model_control_mode != "poll";
    if (!o.auth_token_env.empty() && !o.auth_token_file.empty()) {
        std::cerr << "kiln serve: give --auth-token-env or --auth-token-file, not both\n";
        return 2;
    }
    if (!o.auth_token_env.empty() || !o.auth_token_file.empty()) {
        try {
            state.auth = access_control(read_token(o.auth_token_env, o.auth_token_env_value, o.auth_token_file));
        } catch (const std::exception& e) {
            std::cerr << "kiln serve: " << e.what() << "\n";
            return 2;
        }
        std::cerr << "kiln serve: access control on (token from "
                  << (o.auth_token_env.empty() ? "file " + o.auth_token_file : "$" + o.auth_token_env)
                  << "); health endpoints exempt" << std::endl;
    }
    if (o.tls_cert.empty() != o.tls_key.empty()) {
        std::cerr << "kiln serve: TLS needs both --tls-cert and --tls-key\n";
        return 2;
    }
    rest_server rest(repo, state, o.http_threads, o.tls_cert, o.tls_key);
    int http_port = rest.bind(o.host, o.http_port);
    if (http_port < 0) {
        std::cerr << "kiln serve: cannot listen on " << o.host << ":" << o.http_port
                  << (o.tls_cert.empty() ? "" : " (or the TLS certificate and key do not load)") << "\n";
        return 2;
    }
#ifdef KILN_SERVE_GRPC
    grpc_options go;
    go.max_message_bytes = o.max_message_mb << 20;
    go.tls_cert = o.tls_cert;
    go.tls_key = o.tls_key;
    grpc_server grpc(repo, state, go);
    int grpc_port = -1;
    if (o.grpc_port >= 0) {
        grpc_port = grpc.start(o.host, o.grpc_port);
        if (grpc_port < 0) {
            std::cerr << "kiln serve: cannot listen on " << o.host << ":" << o.grpc_port << " (gRPC)\n";
            return 2;
        }
    }
#else
    const int grpc_port = -1;
    std::cerr << "kiln serve: this kiln was built without gRPC (libgrpc++-dev missing): REST only" << std::endl;
#endif
    http_options metrics_options;
    metrics_options.threads = 2;  // a scrape at a time, and one more
    http_server metrics(metrics_options);
    int metrics_port = -1;
    if (o.metrics_port >= 0) {
        metrics.route("GET", "/metrics", [&](const http_request&, http_response& res) {
            res.set_content(metrics_text(repo), "text/plain; version=0.0.4");
        });
        metrics_port = metrics.bind(o.host, o.metrics_port);
        if (metrics_port < 0) {
            std::cerr << "kiln serve: cannot listen on " << o.host << ":" << o.metrics_port << " (metrics)\n";
            return 2;
        }
    }
    // Probes can reach the server (live, not ready) while the models load.
    std::thread rest_thread([&] { rest.listen(); });
    std::thread metrics_thread([&] {
        if (metrics_port >= 0) metrics.listen();
    });
    std::cerr << "kiln serve: HTTP" << (o.tls_cert.empty() ? "" : "S") << " on " << o.host << ":" << http_port;
    if (grpc_port >= 0) std::cerr << ", gRPC" << (o.tls_cert.empty() ? "" : " (TLS)") << " on " << o.host << ":" << grpc_port;
    if (metrics_port >= 0) std::cerr << ", metrics on " << o.host << ":" << metrics_port << "/metrics";
    std::cerr << std::endl;

    if (o.model_control_mode == "explicit") {
        for (auto& name : o.load_models) {
            if (name == "*") {
                for (auto& e : repo.load_all()) std::cerr << "kiln serve: " << e << "\n";
                continue;
            }
            try {
                repo.load(name);
            } catch (const std::exception& e) {
                std::cerr << "kiln serve: " << e.what() << "\n";
            }
        }
    } else {
        for (auto& e : repo.load_all()) std::cerr << "kiln serve: " << e << "\n";
    }
    state.started = true;
    // Poll mode: a thread rescans the folder until the drain starts.
    std::mutex poll_mutex;
    std::condition_variable poll_cv;
    bool poll_stop = false;
    std::thread poller;
    if (o.model_control_mode == "poll")
        poller = std::thread([&] {
            std::unique_lock<std::mutex> lock(poll_mutex);
            while (!poll_cv.wait_for(lock, std::chrono::seconds(o.poll_secs), [&] { return poll_stop; })) {
                lock.unlock();
                for (auto& line : repo.poll()) std::cerr << "kiln serve: poll: " << line << std::endl;
                lock.lock();
            }
        });
    auto stop_polling = [&] {
        {
            std::lock_guard<std::mutex> lock(poll_mutex);
            poll_stop = true;
        }
        poll_cv.notify_all();
        if (poller.joinable()) poller.join();
    };
#ifdef KILN_SERVE_GRPC
    grpc.set_serving(true);
#endif
    std::cerr << "kiln serve: ready" << std::endl;

    int sig = 0;
    sigwait(&signals, &sig);
    state.draining = true;  // ready answers 400 and new inferences 503 (UNAVAILABLE) from here on
#ifdef KILN_SERVE_GRPC
    grpc.set_serving(false);
#endif
    std::cerr << "kiln serve: signal " << sig << ", draining (up to " << o.exit_timeout_secs << " s)" << std::endl;
    stop_polling();  // waits for a load the poll may be in the middle of
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.exit_timeout_secs);
    const timespec poll{0, 10 * 1000 * 1000};
    while (state.in_flight > 0 && std::chrono::steady_clock::now() < deadline) {
        if (sigtimedwait(&signals, nullptr, &poll) > 0) {
            std::cerr << "kiln serve: second signal, exiting now" << std::endl;
            std::_Exit(1);
        }
    }
    if (state.in_flight > 0) {
        // Their threads cannot be stopped; leaving without joining them is the timeout's point.
        std::cerr << "kiln serve: " << state.in_flight << " request(s) still running after the exit timeout" << std::endl;
        std::_Exit(1);
    }
    rest.stop();
#ifdef KILN_SERVE_GRPC
    grpc.stop();
#endif
    if (metrics_port >= 0) metrics.stop();
    rest_thread.join();
    metrics_thread.join();
    std::cerr << "kiln serve: stopped" << std::endl;
    return 0;
}

}  // namespace kiln::serve
