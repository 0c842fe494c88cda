// kiln_grpc_bench: a C++ load client for `kiln serve`'s gRPC front end, so that latency
// measured over gRPC shows the server and not the client (the Python client spends ~0.9 ms
// moving mobilenet_v2's 602 KB input, on the same cores as the server). Like Triton's
// perf_analyzer it sends inputs as raw_input_contents, one channel per client.
#include <grpc_service.grpc.pb.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iterator>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <kiln/onnx.hpp>

#include "options.hpp"
#include "serve/datatype.hpp"

namespace kiln_grpc_bench {
namespace {

using clock_type = std::chrono::steady_clock;

// Runs once, when the last client is warm: the start of the measured phase (and of requests/s).
struct mark_start {
    clock_type::time_point* at;
    void operator()() noexcept { *at = clock_type::now(); }
};
using warm_barrier = std::barrier<mark_start>;

// The request every client sends: inputs as raw bytes (row-major, as the TensorProto holds them).
inference::ModelInferRequest build_request(const options& o) {
    inference::ModelInferRequest r;
    r.set_model_name(o.model);
    r.set_model_version(o.version);
    for (const auto& in : o.inputs) {
        kiln::argument a;
        try {
            a = kiln::read_tensor_proto(in.path).contiguous();
        } catch (const std::exception& e) {
            throw std::invalid_argument("--input " + in.name + "=" + in.path +
                                        ": cannot read an ONNX TensorProto: " + e.what());
        }
        const auto& s = a.get_shape();
        std::string datatype = kiln::serve::datatype_of(s.get_type());
        if (datatype.empty())
            throw std::invalid_argument("--input " + in.name + "=" + in.path +
                                        ": its element type has no Open Inference Protocol datatype");
        auto* t = r.add_inputs();
        t->set_name(in.name);
        t->set_datatype(datatype);
        for (auto d : s.lens()) t->add_shape(static_cast<std::int64_t>(d));
        r.add_raw_input_contents(a.data(), s.bytes());
    }
    return r;
}

const char* code_name(grpc::StatusCode c) {
    static const char* names[] = {
        "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
        "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
        "DATA_LOSS", "UNAUTHENTICATED"};
    auto i = static_cast<unsigned>(c);
    return i < std::size(names) ? names[i] : "UNKNOWN_CODE";
}

struct results {
    std::mutex lock;
    std::vector<double> ms;  // the measured requests that were answered
    long failures = 0;       // warmup and measured alike
    std::string first_error;

    void fail(std::string why) {
        std::lock_guard g(lock);
        if (failures++ == 0) first_error = std::move(why);
    }
};

// One client: its own channel. A local subchannel pool keeps gRPC from sharing one connection
// between channels with equal arguments, so C clients are C connections, as C processes would be.
void run_client(const options& o, const inference::ModelInferRequest& request, warm_barrier& warmed, results& out) {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(-1);
    args.SetMaxReceiveMessageSize(-1);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    auto channel =
        grpc::CreateCustomChannel(o.host + ":" + std::to_string(o.port), grpc::InsecureChannelCredentials(), args);
    auto stub = inference::GRPCInferenceService::NewStub(channel);
    std::vector<double> ms;
    ms.reserve(o.n);
    auto once = [&](bool timed) {
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));  // grpc takes system_clock
        inference::ModelInferResponse reply;
        auto t0 = clock_type::now();
        grpc::Status st = stub->ModelInfer(&context, request, &reply);
        auto t1 = clock_type::now();
        if (!st.ok())
            out.fail(std::string(code_name(st.error_code())) + ": " + st.error_message());
        else if (reply.outputs_size() == 0)
            out.fail("an answer without outputs");
        else if (timed)
            ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    };
    for (int i = 0; i < o.warmup; ++i) once(false);
    warmed.arrive_and_wait();  // every client warm before any measured request
    for (int i = 0; i < o.n; ++i) once(true);
    std::lock_guard g(out.lock);
    out.ms.insert(out.ms.end(), ms.begin(), ms.end());
}

// Nearest rank, as bench/serve_latency.py: the p-th fraction's element of the sorted times.
double quantile(const std::vector<double>& sorted, double p) {
    return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
}

double median(const std::vector<double>& sorted) {
    auto n = sorted.size();
    return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

void report(const options& o, results& r, double seconds) {
    auto& t = r.ms;
    std::sort(t.begin(), t.end());
    double rate = t.empty() ? 0 : static_cast<double>(t.size()) / seconds;
    double mean = t.empty() ? 0 : std::accumulate(t.begin(), t.end(), 0.0) / static_cast<double>(t.size());
    if (o.json) {
        std::printf(
            "{\"client\": \"kiln_grpc_bench\", \"model\": \"%s\", \"clients\": %d, \"count\": %zu, "
            "\"failures\": %ld",
            o.model.c_str(), o.clients, t.size(), r.failures);
        if (!t.empty())
            std::printf(
                ", \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"mean_ms\": %.4f, \"min_ms\": %.4f, "
                "\"max_ms\": %.4f, \"requests_per_s\": %.2f",
                median(t), quantile(t, 0.9), quantile(t, 0.99), mean, t.front(), t.back(), rate);
        std::printf("}\n");
    } else if (t.empty()) {
        std::printf("%s over gRPC (kiln_grpc_bench): %d client(s), n=0, failures %ld\n", o.model.c_str(), o.clients,
                    r.failures);
    } else {
        std::printf(
            "%s over gRPC (kiln_grpc_bench): %d client(s), n=%zu, failures %ld, p50 %.3f ms, p90 %.3f, "
            "p99 %.3f, mean %.3f, min %.3f; %.1f requests/s\n",
            o.model.c_str(), o.clients, t.size(), r.failures, median(t), quantile(t, 0.9), quantile(t, 0.99), mean,
            t.front(), rate);
    }
    if (r.failures)
        std::fprintf(stderr, "kiln_grpc_bench: %ld of %ld requests failed; the first: %s\n", r.failures,
                     static_cast<long>(o.clients) * (o.warmup + o.n), r.first_error.c_str());
}

}  // namespace
}  // namespace kiln_grpc_bench

int main(int argc, char** argv) {
    using namespace kiln_grpc_bench;
    options o;
    inference::ModelInferRequest request;
    try {
        auto parsed = parse_options(argc, argv);
        if (!parsed) return 0;
        o = std::move(*parsed);
        request = build_request(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kiln_grpc_bench: %s\n", e.what());
        return 2;
    }
    results r;
    clock_type::time_point start;
    warm_barrier warmed(o.clients, mark_start{&start});
    std::vector<std::thread> threads;
    for (int c = 0; c < o.clients; ++c) threads.emplace_back([&] { run_client(o, request, warmed, r); });
    for (auto& t : threads) t.join();
    report(o, r, std::chrono::duration<double>(clock_type::now() - start).count());
    return r.failures ? 1 : 0;
}
