// Commands that compile and run: compile, run, perf, verify.
#include "commands.hpp"
#include "model_io.hpp"
#include "progress.hpp"

#include <kiln/errors.hpp>
#include <kiln/onnx.hpp>
#include <kiln/quantization.hpp>
#include <kiln/serialize.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <map>

#include <unistd.h>

namespace kiln::cli {

using json = nlohmann::ordered_json;
using clock_type = std::chrono::steady_clock;

namespace {

double ms_since(clock_type::time_point t) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t).count();
}

// How OpenMP's threads wait between kernels in this process (main.cpp chooses it for a profile).
std::string openmp_wait_text() {
    for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"})
        if (const char* v = std::getenv(name)) return std::string(name) + "=" + v;
    return "default wait";
}

struct loaded {
    program p;
    double load_ms = 0;
    double compile_ms = 0;
};

// Evals after the warm-up while the target is still trying out how to run them (the cpu
// target's first trial runs some evals a slower way on purpose: team_parts_trial.hpp), so
// that the timed runs do not include them; at most max_settle_runs. A dynamic program's
// specialization made during the warm-up starts its own trial with its first eval.
constexpr std::size_t max_settle_runs = 100;

std::size_t settle(loaded& l, const param_map& inputs) {
    std::size_t n = 0;
    if (l.p.get_specialization_stats().cached > 0) {
        l.p.eval(inputs);
        ++n;
    }
    for (; n < max_settle_runs && l.p.warming_up(); ++n) l.p.eval(inputs);
    return n;
}

loaded load_and_compile(const options& o) {
    loaded l;
    auto t0 = clock_type::now();
    {
        spinner s("loading " + o.model, o.quiet);
        l.p = load_model(o);
    }
    l.load_ms = ms_since(t0);
    auto t1 = clock_type::now();
    {
        spinner s("compiling for " + o.target, o.quiet);
        compile_model(l.p, o, o.target_given);
    }
    l.compile_ms = ms_since(t1);
    return l;
}

json memory_json(const program& p) {
    auto m = p.get_memory_usage();
    return {{"arena_bytes", m.arena_bytes}, {"parameter_bytes", m.parameter_bytes}, {"literal_bytes", m.literal_bytes},
            {"output_bytes", m.output_bytes}};
}

std::string bytes_text(std::size_t b) {
    std::ostringstream ss;
    ss << std::fixed << std::setprecision(2) << static_cast<double>(b) / (1024.0 * 1024.0) << " MiB";
    return ss.str();
}

json output_json(const std::string& name, const argument& a) {
    json j = {{"name", name}, {"shape", a.get_shape().to_string()}};
    auto s = summarize(a);
    if (s.numeric) {
        j["min"] = s.min;
        j["max"] = s.max;
        j["mean"] = s.mean;
        j["first"] = s.first;
    }
    return j;
}

void print_outputs(const program& p, const std::vector<argument>& results) {
    auto names = p.get_output_names();
    for (std::size_t i = 0; i < results.size(); ++i) {
        auto s = summarize(results[i]);
        std::cout << names.at(i) << ": " << results[i].get_shape();
        if (s.numeric) {
            std::cout << std::setprecision(6) << "  min " << s.min << "  max " << s.max << "  mean " << s.mean << "  first [";
            for (std::size_t k = 0; k < s.first.size(); ++k) std::cout << (k ? ", " : "") << s.first[k];
            std::cout << "]";
        } else if (!results[i].get_shape().is_tensor()) {
            std::cout << "  (" << results[i].elements().size() << " elements)";
        }
        std::cout << "\n";
    }
}

// The first dimension of the model's first tensor input (in the model's order, not the
// map's alphabetical one).
std::size_t batch_of(const program& p, const param_map& inputs) {
    for (auto& name : p.get_parameter_names()) {
        auto it = inputs.find(name);
        if (it == inputs.end()) continue;
        const auto& s = it->second.get_shape();
        if (s.is_tensor() && !s.lens().empty()) return s.lens()[0];
    }
    return 1;
}

// A control-flow instruction (loop, if) is timed including its bodies, whose instructions
// are timed too: subtract the bodies so that every row is self time and the rows add up to
// the run. Needs the profiled program's own modules, so a dynamic program (profiled through
// a specialization compiled at run time) keeps inclusive times.
void to_self_time(const program& p, std::vector<instruction_profile>& profile) {
    if (p.dynamic_source() != nullptr) return;
    std::map<std::string, double> module_total;
    for (auto& e : profile) module_total[e.module] += e.total_ms;
    std::map<std::pair<std::string, std::size_t>, std::vector<std::string>> owned;
    for (auto m : p.get_modules()) {
        std::size_t i = 0;
        for (const auto& ins : *m) {
            for (auto sub : ins.module_inputs()) owned[{m->name(), i}].push_back(sub->name());
            ++i;
        }
    }
    for (auto& e : profile)
        if (auto it = owned.find({e.module, e.index}); it != owned.end()) {
            for (auto& sub : it->second) e.total_ms -= module_total[sub];
            e.total_ms = std::max(e.total_ms, 0.0);
        }
}

double percentile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    auto idx = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - 1;
    return v[std::min(idx, v.size() - 1)];
}

// Runs the program `runs` times with profiling, each run into a profile of its own (self
// times), and returns one entry per instruction whose total_ms is the median of its runs.
std::vector<instruction_profile> median_profile(const program& p, const param_map& inputs, std::size_t runs) {
    std::map<std::pair<std::string, std::size_t>, std::pair<instruction_profile, std::vector<double>>> all;
    for (std::size_t r = 0; r < runs; ++r) {
        std::vector<instruction_profile> one;
        p.eval(inputs, one);
        to_self_time(p, one);
        for (auto& e : one) {
            auto& slot = all[{e.module, e.index}];
            if (slot.second.empty()) slot.first = e;
            slot.second.push_back(e.total_ms);
        }
    }
    std::vector<instruction_profile> out;
    for (auto& [key, v] : all) {
        v.second.resize(runs, 0.0);  // an instruction absent from a run (an untaken branch) took 0 there
        v.first.total_ms = percentile(v.second, 0.5);
        out.push_back(v.first);
    }
    return out;
}

// Resident memory now (not the peak), in MiB: what a shape set left behind.
double current_rss_mb() {
    std::ifstream statm("/proc/self/statm");
    double size = 0, resident = 0;
    if (!(statm >> size >> resident)) return 0;
    return resident * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

json stats_json(const specialization_stats& s) {
    return {{"compiles", s.compiles},       {"failed_compiles", s.failed_compiles},
            {"cached", s.cached},           {"evictions", s.evictions},
            {"hits", s.hits},               {"max_specializations", s.max_specializations},
            {"compile_ms", s.compile_ms},   {"background_compiles", s.background_compiles},
            {"generic", s.generic},         {"generic_runs", s.generic_runs}, {"padded_runs", s.padded_runs},
            {"generic_unavailable", s.generic_unavailable}};
}

// kiln perf --shapes: each set of input shapes in turn, on one program, so a dynamic
// program compiles (and caches or evicts) its specializations as a server's would.
int perf_shapes(const options& o, loaded& l) {
    auto base = make_inputs(l.p, o);
    auto names = l.p.get_parameter_names();
    auto declared = l.p.get_parameter_shapes();
    struct row {
        std::string text;
        std::map<std::string, std::vector<std::size_t>> dims;
        double first_ms = 0, median = 0, p90 = 0, min = 0, rss_mb = 0;
        std::size_t compiles = 0, generic_runs = 0, settle_runs = 0;
        json memory;
    };
    std::vector<row> rows;
    for (auto& set : o.shape_sets) {
        row r;
        r.dims = set;
        param_map inputs = base;
        for (auto& [name, dims] : set) {
            auto it = std::find(names.begin(), names.end(), name);
            if (it == names.end()) {
                std::string known;
                for (auto& n : names) known += (known.empty() ? "" : ", ") + n;
                throw_error(error_code::invalid_argument, "--shapes: the model has no input '" + name +
                                                              "' (the inputs are: " + known + ")");
            }
            const auto& d = declared.at(name);
            if (!d.is_tensor())
                throw_error(error_code::invalid_argument, "--shapes: input '" + name + "' is not a tensor");
            // The seed make_inputs uses for this input, so a set equal to the defaults runs the same data.
            auto index = static_cast<std::uint64_t>(it - names.begin());
            inputs[name] = random_argument(shape(d.get_type(), dims), o.seed + index);
        }
        for (auto& n : names) {
            auto it = set.find(n);
            if (it == set.end()) continue;
            std::string dims;
            for (auto v : it->second) dims += (dims.empty() ? "" : "x") + std::to_string(v);
            r.text += (r.text.empty() ? "" : ",") + n + "=" + dims;
        }
        auto before = l.p.get_specialization_stats();
        auto t = clock_type::now();
        l.p.eval(inputs);
        r.first_ms = ms_since(t);
        for (std::size_t i = 0; i < o.warmup; ++i) l.p.eval(inputs);
        // A specialization the warm-up asked for is what a server runs these shapes on
        // once it is ready: time that (the generic program's calls are counted below).
        l.p.finish_specializations();
        r.settle_runs = settle(l, inputs);
        std::vector<double> times;
        for (std::size_t i = 0; i < o.iterations; ++i) {
            auto t1 = clock_type::now();
            l.p.eval(inputs);
            times.push_back(ms_since(t1));
        }
        r.median = percentile(times, 0.5);
        r.p90 = percentile(times, 0.9);
        r.min = *std::min_element(times.begin(), times.end());
        l.p.finish_specializations();  // the compiles this set asked for, counted whole
        auto after = l.p.get_specialization_stats();
        r.compiles = after.compiles - before.compiles;
        r.generic_runs = after.generic_runs - before.generic_runs;
        r.rss_mb = current_rss_mb();
        r.memory = memory_json(l.p);
        rows.push_back(std::move(r));
    }
    auto stats = l.p.get_specialization_stats();
    if (o.json) {
        json j = {{"model", o.model},           {"target", l.p.target_name()}, {"threads", o.threads},
                  {"iterations", o.iterations}, {"warmup", o.warmup},          {"compile_ms", l.compile_ms},
                  {"load_ms", l.load_ms}};
        j["shapes"] = json::array();
        for (auto& r : rows) {
            json inputs = json::object();
            for (auto& [k, v] : r.dims) inputs[k] = v;
            j["shapes"].push_back({{"inputs", inputs}, {"first_call_ms", r.first_ms}, {"compiles", r.compiles},
                                   {"generic_runs", r.generic_runs}, {"settle_runs", r.settle_runs},
                                   {"median_ms", r.median}, {"p90_ms", r.p90}, {"min_ms", r.min},
                                   {"rss_mb", r.rss_mb}, {"memory", r.memory}});
        }
        j["specializations"] = stats_json(stats);
        j["peak_rss_mb"] = peak_rss_mb();
        std::cout << j.dump() << "\n";
        return exit_ok;
    }
    std::cout << std::fixed << std::setprecision(3) << o.model << " on " << l.p.target_name() << ", " << rows.size()
              << " shape sets, " << o.iterations << " runs each after the first call and " << o.warmup
              << " warm-up\n";
    std::size_t width = 0;
    for (auto& r : rows) width = std::max(width, r.text.size());
    for (auto& r : rows) {
        std::cout << "  " << r.text << std::string(width - r.text.size(), ' ') << "  first " << std::setprecision(1)
                  << r.first_ms << " ms (" << r.compiles << (r.compiles == 1 ? " compile" : " compiles") << ", "
                  << r.generic_runs << " on the generic program), median "
                  << std::setprecision(3) << r.median << " ms, min " << r.min << " ms, RSS " << std::setprecision(1)
                  << r.rss_mb << " MiB\n";
    }
    if (l.p.dynamic_source() != nullptr)
        std::cout << "specializations: " << stats.compiles << " compiled (" << std::setprecision(1) << stats.compile_ms
                  << " ms), " << stats.cached << " cached of at most "
                  << (stats.max_specializations ? std::to_string(stats.max_specializations) : std::string("unbounded"))
                  << ", " << stats.evictions << " evicted; "
                  << (stats.generic ? "generic program: " + std::to_string(stats.generic_runs) + " runs"
                                    : "no generic program (" + stats.generic_unavailable + ")")
                  << "\n";
    else std::cout << "static program: no specializations\n";
    std::cout << "peak RSS " << std::setprecision(1) << peak_rss_mb() << " MiB\n";
    return exit_ok;
}

}  // namespace

int cmd_compile(const options& o) {
    auto l = load_and_compile(o);
    auto t = clock_type::now();
    writing("'" + o.output_file + "'", [&] { save(l.p, o.output_file); });
    double save_ms = ms_since(t);
    auto m = l.p.get_memory_usage();
    if (o.json) {
        std::cout << json{{"model", o.model}, {"target", l.p.target_name()}, {"output", o.output_file},
                          {"compile_ms", l.compile_ms}, {"save_ms", save_ms}, {"memory", memory_json(l.p)},
                          {"peak_rss_mb", peak_rss_mb()}}
                         .dump()
                  << "\n";
        return exit_ok;
    }
    std::cout << "compiled " << o.model << " for " << l.p.target_name() << " in " << std::fixed << std::setprecision(1)
              << l.compile_ms << " ms; wrote " << o.output_file << " (" << save_ms << " ms)\n"
              << "memory: arena " << bytes_text(m.arena_bytes) << ", weights " << bytes_text(m.literal_bytes)
              << ", inputs " << bytes_text(m.parameter_bytes) << ", outputs " << bytes_text(m.output_bytes)
              << "; peak RSS " << peak_rss_mb() << " MiB\n";
    return exit_ok;
}

int cmd_run(const options& o) {
    auto l = load_and_compile(o);
    auto inputs = make_inputs(l.p, o);
    const auto before = l.p.get_specialization_stats();
    auto t = clock_type::now();
    auto results = l.p.eval(inputs);
    double run_ms = ms_since(t);
    // A dynamic program may compile the call's shapes on this first call (no generic
    // program for them): part of run_ms, said apart so it is not read as latency.
    const auto after = l.p.get_specialization_stats();
    const double shapes_compile_ms = after.compile_ms - before.compile_ms;
    write_outputs(l.p, results, o);
    if (o.json) {
        json j = {{"model", o.model},   {"target", l.p.target_name()},          {"compile_ms", l.compile_ms},
                  {"run_ms", run_ms},   {"shapes_compile_ms", shapes_compile_ms}};
        j["outputs"] = json::array();
        auto names = l.p.get_output_names();
        for (std::size_t i = 0; i < results.size(); ++i) j["outputs"].push_back(output_json(names.at(i), results[i]));
        std::cout << j.dump() << "\n";
        return exit_ok;
    }
    print_outputs(l.p, results);
    std::cout << std::fixed << std::setprecision(2) << "compile " << l.compile_ms << " ms, run " << run_ms << " ms ("
              << l.p.target_name();
    if (after.compiles > before.compiles)
        std::cout << "; the run compiled these input shapes first, " << shapes_compile_ms << " ms";
    std::cout << ")\n";
    return exit_ok;
}

int cmd_perf(const options& o) {
    auto l = load_and_compile(o);
    if (!o.shape_sets.empty()) return perf_shapes(o, l);
    auto inputs = make_inputs(l.p, o);
    for (std::size_t i = 0; i < o.warmup; ++i) l.p.eval(inputs);
    l.p.finish_specializations();  // time what a server would run once they are ready
    const std::size_t settle_runs = settle(l, inputs);
    std::vector<double> times;
    for (std::size_t i = 0; i < o.iterations; ++i) {
        auto t = clock_type::now();
        l.p.eval(inputs);
        times.push_back(ms_since(t));
    }
    double median = percentile(times, 0.5), p90 = percentile(times, 0.9);
    double min = *std::min_element(times.begin(), times.end());
    auto batch = batch_of(l.p, inputs);
    // Per instruction, the median over the profiled runs (each run profiled on its own):
    // on a shared machine a mean is pulled up by the runs a neighbour disturbed.
    std::size_t profiled_runs = o.per_instruction ? std::max<std::size_t>(o.iterations, 1) : 0;
    auto profile = median_profile(l.p, inputs, profiled_runs);
    double profiled_total = 0;
    for (auto& e : profile) profiled_total += e.total_ms;
    std::sort(profile.begin(), profile.end(), [](auto& a, auto& b) { return a.total_ms > b.total_ms; });
    std::map<std::string, std::pair<double, std::size_t>> kinds;
    for (auto& e : profile) {
        kinds[e.op_name].first += e.total_ms;
        kinds[e.op_name].second += 1;
    }
    std::vector<std::pair<std::string, std::pair<double, std::size_t>>> kind_list(kinds.begin(), kinds.end());
    std::sort(kind_list.begin(), kind_list.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });

    if (o.json) {
        json j = {{"model", o.model},        {"target", l.p.target_name()}, {"batch", batch},
                  {"threads", o.threads},    {"iterations", o.iterations},  {"median_ms", median},
                  {"p90_ms", p90},           {"min_ms", min},               {"throughput_ips", 1000.0 * batch / median},
                  {"compile_ms", l.compile_ms}, {"load_ms", l.load_ms},     {"memory", memory_json(l.p)},
                  {"peak_rss_mb", peak_rss_mb()}, {"run_note", l.p.run_note()}, {"settle_runs", settle_runs}};
        if (o.per_instruction) {
            j["per_instruction"] = json::array();
            for (auto& e : profile)
                j["per_instruction"].push_back({{"module", e.module}, {"index", e.index}, {"op", e.op_name},
                                                {"shape", e.shape}, {"ms", e.total_ms},
                                                {"percent", 100.0 * e.total_ms / profiled_total}, {"note", e.note}});
            j["per_operation"] = json::array();
            for (auto& [k, v] : kind_list)
                j["per_operation"].push_back({{"op", k}, {"count", v.second}, {"ms", v.first},
                                              {"percent", 100.0 * v.first / profiled_total}});
        }
        std::cout << j.dump() << "\n";
        return exit_ok;
    }
    auto m = l.p.get_memory_usage();
    std::cout << std::fixed << std::setprecision(3) << o.model << " on " << l.p.target_name() << ", batch " << batch
              << ", " << o.iterations << " runs after " << o.warmup << " warm-up";
    if (settle_runs > 0) std::cout << " and " << settle_runs << " more while the target tried out how to run them";
    std::cout << "\n"
              << "latency: median " << median << " ms, p90 " << p90 << " ms, min " << min << " ms\n"
              << "throughput: " << std::setprecision(1) << 1000.0 * static_cast<double>(batch) / median
              << " inferences/s\n"
              << "compile: " << l.compile_ms << " ms\n";
    if (const auto note = l.p.run_note(); !note.empty()) std::cout << "threads: " << note << "\n";
    std::cout << "memory: arena " << bytes_text(m.arena_bytes) << ", weights " << bytes_text(m.literal_bytes)
              << ", inputs " << bytes_text(m.parameter_bytes) << ", outputs " << bytes_text(m.output_bytes)
              << "; peak RSS " << peak_rss_mb() << " MiB\n";
    if (o.per_instruction) {
        std::cout << "\nper operation kind (sum of the instructions' medians over " << profiled_runs
                  << " profiled runs; OpenMP " << openmp_wait_text() << "):\n";
        std::cout << std::setprecision(3);
        for (auto& [k, v] : kind_list)
            std::cout << "  " << std::setw(10) << v.first << " ms  " << std::setw(6) << std::setprecision(1)
                      << 100.0 * v.first / profiled_total << "%  " << std::setw(5) << v.second << "x  " << k << "\n"
                      << std::setprecision(3);
        std::cout << "\nper instruction (self time; loop and branch bodies are rows of their own):\n";
        for (auto& e : profile)
            std::cout << "  " << std::setw(10) << e.total_ms << " ms  " << std::setw(6) << std::setprecision(1)
                      << 100.0 * e.total_ms / profiled_total << "%  " << e.module << " @" << e.index << "  "
                      << e.op_name << " -> " << e.shape << (e.note.empty() ? "" : "  [" + e.note + "]") << "\n"
                      << std::setprecision(3);
    }
    return exit_ok;
}

// Accuracy of a reduced-precision run against float32 (verify --fp16/--bf16/--int8): relative L2
// error, cosine similarity and, for outputs that look like class scores (2-D, 10+ columns),
// how often the rows' top-1 agrees and float32's top-1 is among the run's top 5.
json accuracy_json(const std::vector<double>& got, const std::vector<double>& want, const shape& s) {
    double num = 0, den = 0, dot = 0, g2 = 0;
    for (std::size_t k = 0; k < want.size(); ++k) {
        num += (got[k] - want[k]) * (got[k] - want[k]);
        den += want[k] * want[k];
        dot += got[k] * want[k];
        g2 += got[k] * got[k];
    }
    json j = {{"rel_l2", den > 0 ? std::sqrt(num / den) : std::sqrt(num)},
              {"cosine", den > 0 && g2 > 0 ? dot / std::sqrt(den * g2) : 1.0}};
    const auto lens = s.lens();
    if (lens.size() != 2 || lens[1] < 10) return j;
    const std::size_t rows = lens[0], cols = lens[1];
    std::size_t top1 = 0, top5 = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        auto g = got.begin() + static_cast<std::ptrdiff_t>(r * cols);
        auto w = want.begin() + static_cast<std::ptrdiff_t>(r * cols);
        const auto best = static_cast<std::size_t>(std::max_element(w, w + static_cast<std::ptrdiff_t>(cols)) - w);
        const double score = g[static_cast<std::ptrdiff_t>(best)];
        const auto above = std::count_if(g, g + static_cast<std::ptrdiff_t>(cols), [&](double v) { return v > score; });
        top1 += above == 0;
        top5 += above < 5;
    }
    j["top1_agreement"] = static_cast<double>(top1) / static_cast<double>(rows);
    j["top5_agreement"] = static_cast<double>(top5) / static_cast<double>(rows);
    return j;
}

// The rel. L2 a reduced-precision verify accepts: the issue's bounds for the CNNs (int8:
// MobileNetV2's, the loosest; random weights make the CNNs chaotic, docs/quantization.md).
double reduced_rel_l2_bound(type t) {
    return t == type::float16 ? 0.04 : (t == type::int8 || t == type::float8e4m3fn) ? 0.25 : 0.17;
}

int cmd_verify(const options& o) {
    auto l = load_and_compile(o);
    auto inputs = make_inputs(l.p, o);
    auto results = l.p.eval(inputs);
    std::vector<argument> reference;
    std::string against;
    if (!o.expected_dir.empty()) {
        against = o.expected_dir;
        auto shapes = l.p.get_output_shapes();
        for (std::size_t i = 0; i < results.size(); ++i) {
            auto file = std::filesystem::path(o.expected_dir) / ("output_" + std::to_string(i) + ".pb");
            if (!std::filesystem::is_regular_file(file))
                throw_error(error_code::invalid_argument, "--expected " + o.expected_dir + ": no " +
                                                              file.filename().string() + " for output '" +
                                                              l.p.get_output_names().at(i) + "'");
            reference.push_back(read_value_proto(file.string(), shapes[i]));
        }
    } else {
        if (is_kiln_file(o.model))
            throw_error(error_code::invalid_argument, "verify of a saved .kiln program needs --expected DIR (the ref "
                                                      "run needs the model as parsed)");
        options ro = o;
        ro.target = "ref";
        program ref = load_model(ro);
        spinner s("compiling for ref", o.quiet);
        ref.compile(*get_target("ref"));
        reference = ref.eval(inputs);
        against = "ref";
    }
    const type reduced = quantized_type(l.p);
    if (reduced != type::float32) against += " (float32)";
    auto names = l.p.get_output_names();
    bool ok = results.size() == reference.size();
    json outs = json::array();
    for (std::size_t i = 0; i < results.size() && i < reference.size(); ++i) {
        json e = {{"name", names.at(i)}};
        const auto& a = results[i];
        const auto& b = reference[i];
        if (!a.get_shape().is_tensor() || !a.get_shape().same_lens_and_type(b.get_shape()) ||
            a.get_shape().get_type() == type::string) {
            bool same = a == b;
            e["match"] = same;
            e["detail"] = same ? "identical" : "shape/type/value mismatch: " + a.get_shape().to_string() + " vs " +
                                                   b.get_shape().to_string();
            ok = ok && same;
            outs.push_back(e);
            continue;
        }
        auto x = a.to_vector<double>();
        auto y = b.to_vector<double>();
        double max_abs = 0, max_rel = 0, sq = 0;
        std::size_t bad = 0;
        for (std::size_t k = 0; k < x.size(); ++k) {
            // Equal values (equal infinities too) and two NaNs agree; a NaN against a number,
            // or a finite value against an infinity, is an infinite error that no tolerance
            // accepts (inf - inf would be NaN, and inf <= rtol * inf would pass).
            double d = 0;
            if (x[k] == y[k] || (std::isnan(x[k]) && std::isnan(y[k]))) d = 0;
            else if (std::isnan(x[k]) || std::isnan(y[k])) d = std::numeric_limits<double>::infinity();
            else d = std::fabs(x[k] - y[k]);
            max_abs = std::max(max_abs, d);
            if (d > 0 && y[k] != 0 && std::isfinite(y[k])) max_rel = std::max(max_rel, d / std::fabs(y[k]));
            else if (d > 0 && std::isinf(d)) max_rel = d;
            sq += d * d;
            if (d > 0 && (std::isinf(d) || !(d <= o.atol + o.rtol * std::fabs(y[k])))) ++bad;
        }
        double rms = x.empty() ? 0 : std::sqrt(sq / static_cast<double>(x.size()));
        e["max_abs_error"] = max_abs;
        e["max_rel_error"] = max_rel;
        e["rms_error"] = rms;
        e["elements_outside_tolerance"] = bad;
        bool match = bad == 0;
        if (reduced != type::float32) {
            // Against float32 elementwise tolerances mean little: the bound is on rel. L2.
            e.update(accuracy_json(x, y, a.get_shape()));
            match = std::isfinite(e["rel_l2"].get<double>()) && e["rel_l2"].get<double>() <= reduced_rel_l2_bound(reduced);
        }
        e["match"] = match;
        ok = ok && match;
        outs.push_back(e);
    }
    if (o.json) {
        std::cout << json{{"model", o.model}, {"target", l.p.target_name()}, {"against", against},
                          {"precision", std::string(type_name(reduced))}, {"atol", o.atol},
                          {"rtol", o.rtol}, {"passed", ok}, {"outputs", outs}}
                         .dump()
                  << "\n";
    } else {
        std::cout << "verify " << o.model << ": " << l.p.target_name() << " vs " << against << " (atol " << o.atol
                  << ", rtol " << o.rtol << ")\n";
        for (auto& e : outs) {
            std::cout << "  " << e["name"].get<std::string>() << ": ";
            if (!e.contains("max_abs_error")) std::cout << e["detail"].get<std::string>();
            else
                std::cout << std::scientific << std::setprecision(3) << "max abs " << e["max_abs_error"].get<double>()
                          << ", max rel " << e["max_rel_error"].get<double>() << ", rms " << e["rms_error"].get<double>()
                          << ", " << e["elements_outside_tolerance"].get<std::size_t>() << " outside tolerance";
            if (e.contains("rel_l2"))
                std::cout << std::defaultfloat << std::setprecision(4) << "\n    rel. L2 " << e["rel_l2"].get<double>()
                          << " (bound " << reduced_rel_l2_bound(reduced) << "), cosine " << std::setprecision(6)
                          << e["cosine"].get<double>();
            if (e.contains("top1_agreement"))
                std::cout << std::setprecision(4) << ", top-1 agreement " << e["top1_agreement"].get<double>()
                          << ", fp32 top-1 in top-5 " << e["top5_agreement"].get<double>();
            std::cout << (e["match"].get<bool>() ? "  ok" : "  MISMATCH") << "\n";
        }
        std::cout << (ok ? "PASSED" : "FAILED") << "\n";
    }
    return ok ? exit_ok : exit_mismatch;
}

}  // namespace kiln::cli
