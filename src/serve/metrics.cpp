#include "serve/metrics.hpp"

#include <fstream>
#include <functional>
#include <sstream>

#include <unistd.h>

namespace kiln::serve {

namespace {

struct metric {
    const char* name;
    const char* type;
    const char* help;
    std::function<double(const model_stats&)> get;
};

double resident_bytes() {
    std::ifstream f("/proc/self/statm");
    long pages = 0, resident = 0;
    f >> pages >> resident;
    return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

// Prometheus label values escape backslash, quote and newline.
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') out += '\\', out += c;
        else if (c == '\n') out += "\\n";
        else out += c;
    }
    return out;
}

}  // namespace

std::string metrics_text(const model_repository& repo) {
    static const std::vector<metric> metrics = {
        {"kiln_inference_request_success", "counter", "Successful inference requests",
         [](auto& s) { return double(s.success); }},
        {"kiln_inference_request_failure", "counter", "Failed inference requests", [](auto& s) { return double(s.failure); }},
        {"kiln_inference_count", "counter", "Inferences performed (a batch of N counts N)",
         [](auto& s) { return double(s.inference_count); }},
        {"kiln_inference_exec_count", "counter", "Model executions", [](auto& s) { return double(s.exec_count); }},
        {"kiln_inference_request_duration_us", "counter", "Cumulative end-to-end time of successful requests (us)",
         [](auto& s) { return double(s.success_ns) / 1e3; }},
        {"kiln_inference_queue_duration_us", "counter", "Cumulative time requests waited for an instance (us)",
         [](auto& s) { return double(s.queue_ns) / 1e3; }},
        {"kiln_inference_compute_input_duration_us", "counter", "Cumulative time checking and copying inputs (us)",
         [](auto& s) { return double(s.compute_input_ns) / 1e3; }},
        {"kiln_inference_compute_infer_duration_us", "counter", "Cumulative time running the model (us)",
         [](auto& s) { return double(s.compute_infer_ns) / 1e3; }},
        {"kiln_inference_compute_output_duration_us", "counter", "Cumulative time gathering outputs (us)",
         [](auto& s) { return double(s.compute_output_ns) / 1e3; }},
        {"kiln_inference_pending_request_count", "gauge", "Requests received and not yet answered",
         [](auto& s) { return double(s.pending); }},
        {"kiln_model_load_count", "counter", "Loads of this version (the first and each reload)",
         [](auto& s) { return double(s.loads); }},
        {"kiln_model_load_duration_us", "gauge", "Time the latest load took (us)",
         [](auto& s) { return double(s.load_ns) / 1e3; }},
    };
    auto models = repo.loaded();
    std::ostringstream out;
    out.precision(15);
    for (auto& m : metrics) {
        out << "# HELP " << m.name << " " << m.help << "\n# TYPE " << m.name << " " << m.type << "\n";
        for (auto& lm : models)
            out << m.name << "{model=\"" << label(lm->name) << "\",version=\"" << lm->version << "\"} "
                << m.get(*lm->stats) << "\n";
    }
    // Cumulative buckets, as Prometheus histograms are: le="X" counts the requests <= X.
    out << "# HELP kiln_inference_request_latency_us Successful requests by duration (us)\n"
           "# TYPE kiln_inference_request_latency_us histogram\n";
    for (auto& lm : models) {
        const auto& s = *lm->stats;
        const std::string labels = "model=\"" + label(lm->name) + "\",version=\"" + std::to_string(lm->version) + "\"";
        std::uint64_t cumulative = 0;
        for (std::size_t i = 0; i < s.latency_buckets.size(); ++i) {
            cumulative += s.latency_buckets[i];
            auto le = i < model_stats::latency_bounds_us.size() ? std::to_string(model_stats::latency_bounds_us[i]) : "+Inf";
            out << "kiln_inference_request_latency_us_bucket{" << labels << ",le=\"" << le << "\"} " << cumulative << "\n";
        }
        out << "kiln_inference_request_latency_us_sum{" << labels << "} " << double(s.success_ns) / 1e3 << "\n"
            << "kiln_inference_request_latency_us_count{" << labels << "} " << cumulative << "\n";
    }
    out << "# HELP kiln_process_resident_memory_bytes Resident memory of the server\n"
           "# TYPE kiln_process_resident_memory_bytes gauge\nkiln_process_resident_memory_bytes "
        << resident_bytes() << "\n";
    return out.str();
}

}  // namespace kiln::serve
