// The choices exhaustive_tune made, by problem (tuning.hpp): shared by the compiles of one
// cpu context, and read from and written to the file KILN_TUNING_CACHE names, so that a
// second compile of the same model on the same machine does not measure again. Keys
// start with the CPU model, the ISA Kiln's kernels use and the thread count: a choice made
// on one machine is never taken for another.
//
// File: one line per problem, `key<TAB>chosen<TAB>name=ms name=ms ...`. Saved atomically
// (a temporary file renamed over it) after merging what the file holds by then, so
// concurrent compiles lose nothing but a race on the same key.
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::cpu {

struct tuning_record {
    std::string chosen;
    std::vector<std::pair<std::string, double>> ms;  // what each candidate measured (best run)
};

class tuning_table {
public:
    // Loads `path` when set (a missing or unreadable file, or bad lines, are skipped).
    explicit tuning_table(std::string path);
    std::optional<tuning_record> find(const std::string& key) const;
    void record(const std::string& key, tuning_record r);
    // Writes the file when a path is set and something new was recorded; a failure to
    // write is reported on stderr, never thrown (the compile itself succeeded).
    void save();
    std::size_t size() const;

private:
    std::string path_;
    mutable std::mutex mutex_;
    std::map<std::string, tuning_record> entries_;
    bool dirty_ = false;
};

}  // namespace kiln::cpu
