#include <kiln/errors.hpp>
#include <kiln/target.hpp>

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <set>
#include <string>

namespace kiln {

namespace {

struct target_module {
    std::string file_name;
    std::once_flag loaded;
};

struct registry {
    std::mutex mutex;
    std::map<std::string, std::shared_ptr<const target>> targets;
    std::map<std::string, target_module> modules;  // never erased: their once_flags stay put
};

registry& the_registry() {
    static registry r;
    return r;
}

class unavailable_target final : public target {
public:
    unavailable_target(std::string name, std::string why) : name_(std::move(name)), why_(std::move(why)) {}
    std::string name() const override { return name_; }
    std::string unavailable_reason() const override { return why_; }
    std::shared_ptr<context> make_context(const compile_options&) const override { refuse(); }
    std::vector<pass> get_passes(context&, const compile_options&) const override { refuse(); }

private:
    [[noreturn]] void refuse() const { throw_error(error_code::unsupported, "target " + name_ + ": " + why_); }
    std::string name_, why_;
};

// The folder libkiln was loaded from (the build's lib/ or the install's): modules lie beside it.
std::string library_folder() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<const void*>(&register_target_module), &info) == 0 || info.dli_fname == nullptr)
        return {};
    std::string path(info.dli_fname);
    const auto slash = path.rfind('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// dlopen runs the module's static initializers, which call register_target: the registry's
// mutex must not be held here. Modules are never unloaded (their targets and operators are
// referenced from every program compiled for them).
void load_module(const std::string& name, const std::string& file_name) {
    const std::string path = library_folder() + file_name;
    if (dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) == nullptr) {
        const char* why = dlerror();
        register_target(make_unavailable_target(
            name, "cannot load its module " + file_name + ": " + (why != nullptr ? why : "unknown error")));
        return;
    }
    registry& r = the_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.targets.count(name) == 0)
        r.targets[name] = make_unavailable_target(name, "its module " + file_name + " registered no target '" + name + "'");
}

}  // namespace

void register_target(std::shared_ptr<const target> t) {
    registry& r = the_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.targets[t->name()] = std::move(t);
}

void register_target_module(const std::string& name, const std::string& file_name) {
    registry& r = the_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.modules[name].file_name = file_name;
}

std::shared_ptr<const target> make_unavailable_target(const std::string& name, const std::string& why) {
    return std::make_shared<unavailable_target>(name, why);
}

std::shared_ptr<const target> get_target(const std::string& name) {
    registry& r = the_registry();
    target_module* module = nullptr;
    {
        std::lock_guard<std::mutex> lock(r.mutex);
        if (auto it = r.targets.find(name); it != r.targets.end()) return it->second;
        if (auto it = r.modules.find(name); it != r.modules.end()) module = &it->second;
    }
    if (module != nullptr) {
        std::call_once(module->loaded, [&] { load_module(name, module->file_name); });
        std::lock_guard<std::mutex> lock(r.mutex);
        if (auto it = r.targets.find(name); it != r.targets.end()) return it->second;
    }
    std::string known;
    for (const auto& k : get_target_names()) known += (known.empty() ? "" : ", ") + k;
    throw_error(error_code::invalid_argument, "unknown target '" + name + "' (known: " + known + ")");
}

std::vector<std::string> get_target_names() {
    registry& r = the_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    std::set<std::string> names;
    for (const auto& [k, v] : r.targets) names.insert(k);
    for (const auto& [k, v] : r.modules) names.insert(k);
    return {names.begin(), names.end()};
}

}  // namespace kiln
