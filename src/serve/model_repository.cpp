#include "serve/model_repository.hpp"

#include "serve/datatype.hpp"
#include "serve/errors.hpp"
#include "serve/infer.hpp"

#include <kiln/errors.hpp>
#include <kiln/onnx.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include <malloc.h>

namespace kiln::serve {

namespace fs = std::filesystem;

namespace {

std::optional<std::int64_t> version_number(const std::string& folder) {
    if (folder.empty() || folder.size() > 18 || !std::all_of(folder.begin(), folder.end(), ::isdigit)) return std::nullopt;
    auto v = std::stoll(folder);
    return v >= 1 ? std::optional<std::int64_t>(v) : std::nullopt;
}

std::vector<std::int64_t> versions_on_disk(const fs::path& model_dir) {
    std::vector<std::int64_t> out;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(model_dir, ec))
        if (e.is_directory())
            if (auto v = version_number(e.path().filename().string())) out.push_back(*v);
    return out;
}

// What a poll compares: the version folders and the size and time of every file a load
// reads (config.pbtxt, warmup/*, each version's model.onnx and model.kiln; not the compiled
// caches Kiln writes beside them, which would make every load look like a change).
std::string fingerprint(const fs::path& model_dir) {
    std::string out;
    auto add = [&](const fs::path& f) {
        std::error_code ec;
        auto size = fs::file_size(f, ec);
        if (ec) return;
        auto time = fs::last_write_time(f, ec);
        if (ec) return;
        out += f.lexically_relative(model_dir).string() + ":" + std::to_string(size) + ":" +
               std::to_string(time.time_since_epoch().count()) + ";";
    };
    add(model_dir / "config.pbtxt");
    std::error_code ec;
    std::vector<fs::path> samples;  // model_warmup's input_data_file
    for (auto& e : fs::directory_iterator(model_dir / "warmup", ec)) samples.push_back(e.path());
    std::sort(samples.begin(), samples.end());
    for (auto& f : samples) add(f);
    auto versions = versions_on_disk(model_dir);
    std::sort(versions.begin(), versions.end());
    for (auto v : versions) {
        out += std::to_string(v) + "/;";
        add(model_dir / std::to_string(v) / "model.onnx");
        add(model_dir / std::to_string(v) / "model.kiln");
    }
    return out;
}

std::size_t default_threads(const model_config& c) {
    if (c.threads) return c.threads;
    std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
    return std::max<std::size_t>(1, cores / c.instance_count);
}

std::string describe(const tensor_spec& t) {
    std::string s = t.name + ": " + std::string(type_name(t.element_type)) + "[";
    auto dims = t.protocol_shape();
    for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
    return s + "]";
}

// The batcher runs any number of rows up to max_batch_size: the batch dim's sizes worth
// compiling ahead (dynamic_buckets: the preferred sizes, else powers of two and the
// maximum), so that batches neither run on the generic program nor compile while serving.
// Sizes between two buckets run padded to the next where the model keeps rows apart.
// Only when dim 0 is the inputs' one dynamic dim: a bucket's program stays generic in the
// other dims, and every call would run on it instead of a specialization (an LSTM batched
// with buckets took 249 ms a run on its generic time loop, 6.8 ms specialized).
std::vector<dim_buckets> batch_buckets(const program& p, const model_config& c) {
    for (auto& [name, s] : p.get_parameter_shapes())
        if (s.is_tensor() && s.dynamic())
            for (std::size_t i = 1; i < s.dyn_dims().size(); ++i)
                if (!s.dyn_dims()[i].is_fixed()) return {};
    for (auto& [name, s] : p.get_parameter_shapes()) {
        if (!s.is_tensor() || !s.dynamic() || s.dyn_dims().empty() || s.dyn_dims()[0].symbol.empty()) continue;
        dim_buckets b{s.dyn_dims()[0].symbol, c.preferred_batch_sizes};
        if (b.sizes.empty()) {
            for (std::size_t n = 1; n < c.max_batch_size; n *= 2) b.sizes.push_back(n);
            b.sizes.push_back(c.max_batch_size);
        }
        return {b};
    }
    return {};
}

// Without model_warmup: runs the model once on zeros at its default shapes before it serves
// (or replaces the version serving), so the first request after a load or a swap does not
// pay for what a first eval sets up (kernels created on first use, arenas), and again while
// the target is still trying out how to run it (program::warming_up: the cpu target's first
// evals try a thread team and no team, some slower on purpose), within warm_up_budget. A
// model that fails on zeros may still serve real inputs: the failure is logged, not fatal.
constexpr std::size_t warm_up_max_runs = 100;
constexpr auto warm_up_budget = std::chrono::seconds(2);
void warm_up_on_zeros(const loaded_model& m, std::string& log) {
    param_map params;
    for (auto& t : m.inputs) {
        if (t.optional) continue;
        std::vector<std::size_t> lens;
        for (auto& d : t.dims)
            lens.push_back(d.is_fixed() ? d.min : d.has_optimal() ? *d.optimals.begin() : std::max<std::size_t>(d.min, 1));
        params[t.name] = argument{shape(t.element_type, lens)};
    }
    const auto start = std::chrono::steady_clock::now();
    try {
        m.prog->eval(params);
        std::size_t more = 0;
        while (m.prog->warming_up() && more < warm_up_max_runs &&
               std::chrono::steady_clock::now() - start < warm_up_budget) {
            m.prog->eval(params);
            ++more;
        }
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
        log += "; warmed up in " + std::to_string(ms) + " ms";
        if (more > 0) log += " (" + std::to_string(more + 1) + " runs: the target tried out how to run it)";
    } catch (const std::exception& e) {
        log += std::string("; warm-up on zeros failed (") + e.what() + ")";
    }
}

std::string read_file(const fs::path& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return {};
    std::ostringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

// model_warmup: each sample as a request (so checked against the model as a request is:
// names, datatypes, shapes, sizes), run `count` times. The configuration asked for these
// samples to work, so a failure fails the load (a reload keeps the old version serving).
// Random data is [0, 1) for floating types and 0 or 1 otherwise: indices stay in range
// for a Gather or an embedding.
void warm_up_configured(loaded_model& m, const fs::path& model_dir, std::string& log) {
    const auto start = std::chrono::steady_clock::now();
    std::mt19937 gen(22);
    for (const auto& sample : m.config.warmup) {
        const std::string where = "model_warmup '" + sample.name + "': ";
        try {
            infer_request r;
            r.model = m.name;
            std::vector<std::string> files;  // the raw bytes the inputs view
            files.reserve(sample.inputs.size());
            for (const auto& w : sample.inputs) {
                infer_input in{w.name, w.datatype, w.shape, {}};
                if (w.source == warmup_input::file) {
                    const auto path = model_dir / "warmup" / w.file_name;
                    if (!fs::is_regular_file(path))
                        fail(error_kind::bad_request, "input '" + w.name + "': input_data_file '" + w.file_name +
                                                          "' is not a file in the model's warmup/ folder");
                    // Its size against the shape before reading it (a wrong file may be huge).
                    const auto bytes = fs::file_size(path);
                    const auto needs = checked_elements(w.name, w.shape) * type_size(*type_of_datatype(w.datatype));
                    if (bytes != needs) {
                        std::string dims;
                        for (auto d : w.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
                        fail(error_kind::bad_request, "input '" + w.name + "': input_data_file '" + w.file_name +
                                                          "' holds " + std::to_string(bytes) + " bytes; shape [" + dims +
                                                          "] of " + w.datatype + " needs " + std::to_string(needs));
                    }
                    files.push_back(read_file(path));
                    in.data.is_raw = true;
                    in.data.raw = files.back();
                } else {
                    in.data.count = checked_elements(w.name, w.shape);
                    const bool floating = w.datatype.starts_with("FP") || w.datatype == "BF16";
                    if (w.source == warmup_input::random)
                        in.data.fill = [&gen, floating](const argument& dst) {
                            std::uniform_real_distribution<double> u(0.0, 1.0);
                            visit(dst, [&](auto view) {
                                using C = std::remove_cv_t<std::remove_reference_t<decltype(view[0])>>;
                                if constexpr (!std::is_same_v<C, std::string>)
                                    for (std::size_t i = 0; i < view.size(); ++i)
                                        view[i] = convert<C>(floating ? u(gen) : static_cast<double>(gen() % 2));
                            });
                        };
                }
                r.inputs.push_back(std::move(in));
            }
            auto params = make_params(m, r);  // validated like a request; zeros unless filled
            for (std::size_t i = 0; i < sample.count; ++i) {
                m.prog->eval(params);
                m.warmup_runs++;
            }
        } catch (const serve_error& e) {
            fail(error_kind::bad_request, where + e.what());
        } catch (const std::exception& e) {
            fail(error_kind::bad_request, where + "the model failed on it: " + e.what());
        }
    }
    // A dynamic program specializes shapes that recur (specialize_after) in the background:
    // those the samples ran are compiled now, before the version serves, so that its first
    // requests of those shapes neither run on the generic program nor compete with the
    // compiles for the cores (an LSTM's batches of 1 to 8 rows: name each in a sample).
    m.prog->finish_specializations();
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count();
    log += "; model_warmup: " + std::to_string(m.warmup_runs) + " run(s) in " + std::to_string(ms) + " ms";
    if (auto st = m.prog->get_specialization_stats(); st.compiles)
        log += " (" + std::to_string(st.compiles) + " specializations)";
}

// A version's memory (weights, arenas: tens of MB) is freed when its last reference goes:
// after the swap, or in the thread of the last request still running on it. glibc keeps
// what a thread frees in that thread's arena (and, once big blocks have been freed, no
// longer trims on free), while the next load, in another thread, may take fresh pages
// from another arena: mobilenet_v2's RSS went up by one version (27 MB) every other
// reload when a request thread let go last. So memory goes back to the system right
// where a version is freed.
std::shared_ptr<loaded_model> make_loaded_model(const std::string& name, std::int64_t v,
                                                std::shared_ptr<const program> prog, const model_config& config,
                                                std::shared_ptr<model_stats> stats) {
    return std::shared_ptr<loaded_model>(new loaded_model(name, v, std::move(prog), config, std::move(stats)),
                                         [](loaded_model* m) {
                                             delete m;
                                             malloc_trim(0);
                                         });
}

}  // namespace

model_repository::model_repository(std::string dir) : dir_(std::move(dir)) {}

std::vector<std::string> model_repository::model_names() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (auto& e : fs::directory_iterator(dir_, ec))
        if (e.is_directory() && !versions_on_disk(e.path()).empty()) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

std::shared_ptr<const program> model_repository::compile_version(const std::string& version_dir, const model_config& c,
                                                                 std::string* log) {
    auto note = [&](const std::string& s) {
        if (log) *log += (log->empty() ? "" : "; ") + s;
    };
    fs::path dir(version_dir);
    if (fs::exists(dir / "model.kiln")) {
        note("loading " + (dir / "model.kiln").filename().string());
        return std::make_shared<const program>(kiln::load((dir / "model.kiln").string()));
    }
    auto onnx = dir / "model.onnx";
    if (!fs::exists(onnx)) fail(error_kind::bad_request, "no model.onnx or model.kiln in version folder " + dir.filename().string());
    // Serving is running: a target that cannot run here fails the load with its reason, rather
    // than a model that turns ready and fails every request (a .kiln says so when it loads).
    auto t = get_target(c.target);
    if (auto why = t->unavailable_reason(); !why.empty())
        fail(error_kind::bad_request, "target " + c.target + " is not available here: " + why);
    compile_options options;
    options.threads = default_threads(c);
    // The cache's name carries what the compiled program depends on besides the .onnx.
    std::string variant = c.target + "-t" + std::to_string(options.threads);
    if (c.dynamic_batching) variant += "-b" + std::to_string(c.max_batch_size);
    auto cache = dir / ("model.onnx." + variant + ".kiln");
    std::error_code ec;
    if (fs::exists(cache) && fs::last_write_time(cache, ec) >= fs::last_write_time(onnx, ec) && !ec) {
        try {
            auto p = kiln::load(cache.string());
            note("loaded the cached " + cache.filename().string());
            return std::make_shared<const program>(std::move(p));
        } catch (const std::exception& e) {
            note("the cached " + cache.filename().string() + " does not load (" + e.what() + "): compiling again");
        }
    }
    auto p = parse_onnx(onnx.string());
    if (c.dynamic_batching) options.dynamic_buckets = batch_buckets(p, c);
    p.compile(*t, options);
    try {
        save(p, cache.string());  // atomic: a temporary file renamed over the cache
        note("compiled; cached as " + cache.filename().string());
    } catch (const std::exception& e) {
        note(std::string("compiled; not cached (") + e.what() + ")");
    }
    return std::make_shared<const program>(std::move(p));
}

std::shared_ptr<model_stats> model_repository::stats_for(const std::string& name, std::int64_t version) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& s = stats_[{name, version}];
    if (!s) s = std::make_shared<model_stats>();
    return s;
}

void model_repository::load(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        fail(error_kind::bad_request, "'" + name + "' is not a model name");
    auto model_dir = fs::path(dir_) / name;
    if (!fs::is_directory(model_dir)) fail(error_kind::not_found, "no model '" + name + "' in the repository");
    std::lock_guard<std::mutex> serial(load_mutex_);
    const auto files = fingerprint(model_dir);  // before reading them: a change during the load is seen next time
    {
        std::lock_guard<std::mutex> lock(mutex_);
        fingerprints_[name] = files;
    }
    std::map<std::int64_t, std::shared_ptr<loaded_model>> fresh;
    try {
        auto config = read_model_config(model_dir.string(), name);
        auto versions = select_versions(config, versions_on_disk(model_dir));
        if (versions.empty()) fail(error_kind::bad_request, "model '" + name + "': no version folder the version_policy selects");
        for (auto v : versions) {
            auto start = std::chrono::steady_clock::now();
            std::string log;
            auto stats = stats_for(name, v);
            std::shared_ptr<loaded_model> m;
            try {
                auto prog = compile_version((model_dir / std::to_string(v)).string(), config, &log);
                m = make_loaded_model(name, v, prog, config, stats);
                if (config.warmup.empty()) warm_up_on_zeros(*m, log);
                else warm_up_configured(*m, model_dir, log);
            } catch (const serve_error& e) {
                fail(e.kind(), "model '" + name + "' version " + std::to_string(v) + ": " + e.what());
            } catch (const std::exception& e) {
                fail(error_kind::bad_request, "model '" + name + "' version " + std::to_string(v) + ": " + e.what());
            }
            auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
            stats->loads++;
            stats->load_ns = static_cast<std::uint64_t>(ns.count());
            std::cerr << "kiln serve: model '" << name << "' version " << v << ": " << log << "; ready in "
                      << ns.count() / 1000000 << " ms, " << config.instance_count << " instance(s)\n";
            for (auto& t : m->inputs) std::cerr << "  input  " << describe(t) << "\n";
            for (auto& t : m->outputs) std::cerr << "  output " << describe(t) << "\n";
            fresh[v] = std::move(m);
        }
    } catch (const serve_error& e) {
        std::lock_guard<std::mutex> lock(mutex_);
        auto& entry = models_[name];
        if (entry.versions.empty()) entry.state = "UNAVAILABLE";
        entry.reason = e.what();  // the old versions, if any, keep serving
        throw;
    }
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto& entry = models_[name];
        entry.versions.swap(fresh);  // `fresh` now holds the old versions, released after the lock
        entry.state = "READY";
        entry.reason.clear();
    }
    fresh.clear();  // the old versions, unless requests still hold them
}

void model_repository::unload(const std::string& name) {
    std::lock_guard<std::mutex> serial(load_mutex_);
    std::map<std::int64_t, std::shared_ptr<loaded_model>> old;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = models_.find(name);
        if (it == models_.end()) {
            if (!fs::is_directory(fs::path(dir_) / name)) fail(error_kind::not_found, "no model '" + name + "'");
            return;
        }
        old.swap(it->second.versions);
        it->second.state = "UNAVAILABLE";
        it->second.reason = "unloaded";
    }
    // In-flight requests hold their own references: the programs go when the last ends.
    old.clear();
}

std::vector<std::string> model_repository::load_all() {
    std::vector<std::string> errors;
    for (auto& n : model_names()) {
        try {
            load(n);
        } catch (const std::exception& e) {
            errors.push_back(e.what());
        }
    }
    return errors;
}

std::vector<std::string> model_repository::poll() {
    std::vector<std::string> log;
    const auto names = model_names();
    std::vector<std::string> changed, gone;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto& n : names) {
            auto it = fingerprints_.find(n);
            if (it == fingerprints_.end() || it->second != fingerprint(fs::path(dir_) / n)) changed.push_back(n);
        }
        for (auto& [n, e] : models_)
            if (!e.versions.empty() && std::find(names.begin(), names.end(), n) == names.end()) gone.push_back(n);
    }
    for (auto& n : gone) {
        unload(n);
        std::lock_guard<std::mutex> lock(mutex_);
        fingerprints_.erase(n);
        log.push_back("model '" + n + "' is gone from the repository: unloaded");
    }
    for (auto& n : changed) {
        try {
            load(n);
            log.push_back("model '" + n + "' (re)loaded: its files changed");
        } catch (const std::exception& e) {
            log.push_back(e.what());
        }
    }
    return log;
}

std::shared_ptr<loaded_model> model_repository::find(const std::string& name, std::optional<std::int64_t> version) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) fail(error_kind::not_found, "unknown model '" + name + "'");
    const auto& versions = it->second.versions;
    if (versions.empty())
        fail(error_kind::unavailable, "model '" + name + "' is not ready" +
                                          (it->second.reason.empty() ? "" : ": " + it->second.reason));
    if (!version) return versions.rbegin()->second;
    auto v = versions.find(*version);
    if (v == versions.end())
        fail(error_kind::not_found, "model '" + name + "' has no version " + std::to_string(*version) + " loaded");
    return v->second;
}

bool model_repository::is_ready(const std::string& name, std::optional<std::int64_t> version) const {
    try {
        return find(name, version) != nullptr;
    } catch (const serve_error&) {
        return false;
    }
}

bool model_repository::all_ready() const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [n, e] : models_)
        if (e.versions.empty() && e.reason != "unloaded") return false;
    return true;
}

std::vector<index_entry> model_repository::index() const {
    std::vector<index_entry> out;
    auto names = model_names();
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [n, e] : models_)
        if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
    std::sort(names.begin(), names.end());
    for (auto& n : names) {
        auto it = models_.find(n);
        if (it == models_.end()) {
            out.push_back({n, "", "UNAVAILABLE", "not loaded"});
            continue;
        }
        if (it->second.versions.empty()) out.push_back({n, "", it->second.state, it->second.reason});
        for (auto& [v, m] : it->second.versions) out.push_back({n, std::to_string(v), "READY", ""});
    }
    return out;
}

std::vector<std::shared_ptr<loaded_model>> model_repository::loaded() const {
    std::vector<std::shared_ptr<loaded_model>> out;
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [n, e] : models_)
        for (auto& [v, m] : e.versions) out.push_back(m);
    return out;
}

}  // namespace kiln::serve
