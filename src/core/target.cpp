#include <kiln/errors.hpp>
#include <kiln/target.hpp>

#include <map>
#include <mutex>

namespace kiln {

namespace {
std::map<std::string, std::shared_ptr<const target>>& targets() {
    static std::map<std::string, std::shared_ptr<const target>> t;
    return t;
}
std::mutex& targets_mutex() {
    static std::mutex m;
    return m;
}
}  // namespace

void register_target(std::shared_ptr<const target> t) {
    std::lock_guard<std::mutex> lock(targets_mutex());
    targets()[t->name()] = std::move(t);
}

std::shared_ptr<const target> get_target(const std::string& name) {
    std::lock_guard<std::mutex> lock(targets_mutex());
    auto it = targets().find(name);
    if (it != targets().end()) return it->second;
    std::string known;
    for (auto& [k, v] : targets()) known += (known.empty() ? "" : ", ") + k;
    throw_error(error_code::invalid_argument, "unknown target '" + name + "' (known: " + known + ")");
}

std::vector<std::string> get_target_names() {
    std::lock_guard<std::mutex> lock(targets_mutex());
    std::vector<std::string> names;
    for (auto& [k, v] : targets()) names.push_back(k);
    return names;
}

}  // namespace kiln
