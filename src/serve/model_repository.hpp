// The model repository: DIR/M/V/model.onnx (compiled on load) or DIR/M/V/model.kiln, with an
// optional DIR/M/config.pbtxt. Loading compiles beside whatever serves now and then swaps
// the model's versions in one step under a lock: requests that already hold the old
// loaded_model (a shared_ptr) finish on it, and it is freed after the last of them.
// A failed load leaves the old versions serving. Loads are serialized with each other but
// never block requests.
#pragma once
#include "serve/loaded_model.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::serve {

struct index_entry {
    std::string name;
    std::string version;  // "" for a model with no version loaded
    std::string state;    // READY, UNAVAILABLE, LOADING
    std::string reason;
};

class model_repository {
public:
    explicit model_repository(std::string dir);

    // The folders of DIR that look like models (hold at least one numeric version folder).
    std::vector<std::string> model_names() const;
    // Loads (or reloads) every version the model's policy selects. Throws serve_error:
    // not_found without such a folder, bad_request for a bad config or model.
    void load(const std::string& name);
    void unload(const std::string& name);
    // Loads every model; returns the errors (one line each) of those that failed.
    std::vector<std::string> load_all();
    // --model-control-mode poll, one round: models whose files changed since their last load
    // (a version folder added or removed, model.onnx, model.kiln or config.pbtxt rewritten)
    // or that are new are loaded (the same swap as a reload: a failed one keeps the old
    // versions serving and is not retried until the files change again), and loaded models
    // whose folder is gone are unloaded. Returns what it did and the errors, one line each.
    std::vector<std::string> poll();

    // The version asked for, or the highest loaded one. Throws not_found / unavailable.
    std::shared_ptr<loaded_model> find(const std::string& name, std::optional<std::int64_t> version = {}) const;
    bool is_ready(const std::string& name, std::optional<std::int64_t> version = {}) const;
    // Every model tried is serving (those unloaded on purpose aside): the server's readiness.
    bool all_ready() const;
    std::vector<index_entry> index() const;
    // Every loaded version (metrics, statistics).
    std::vector<std::shared_ptr<loaded_model>> loaded() const;

    // Compiles (or loads) one version's program, using and refreshing the cached .kiln
    // beside an .onnx. Public for the tests.
    static std::shared_ptr<const program> compile_version(const std::string& version_dir, const model_config& c,
                                                          std::string* log = nullptr);

private:
    struct entry {
        std::map<std::int64_t, std::shared_ptr<loaded_model>> versions;
        std::string state = "UNAVAILABLE";
        std::string reason;
    };
    std::shared_ptr<model_stats> stats_for(const std::string& name, std::int64_t version);

    std::string dir_;
    mutable std::mutex mutex_;  // guards models_ and stats_; held only to read or swap
    std::map<std::string, entry> models_;
    std::map<std::pair<std::string, std::int64_t>, std::shared_ptr<model_stats>> stats_;
    std::map<std::string, std::string> fingerprints_;  // the model folder's files at its last load
    std::mutex load_mutex_;  // one load at a time (compiles would only fight for the cores)
};

}  // namespace kiln::serve
