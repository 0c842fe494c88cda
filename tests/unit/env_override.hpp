// Test helper: an environment variable set (or unset) for one scope, restored after.
#pragma once
#include <cstdlib>
#include <optional>
#include <string>

namespace kiln::test {

// Sets (or unsets, with nullptr) an environment variable for the scope.
class env_override {
public:
    env_override(const char* name, const char* v) : name_(name) {
        if (const char* old = std::getenv(name)) old_ = old;
        if (v) ::setenv(name, v, 1);
        else ::unsetenv(name);
    }
    ~env_override() {
        if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
        else ::unsetenv(name_.c_str());
    }
    env_override(const env_override&) = delete;
    env_override& operator=(const env_override&) = delete;

private:
    std::string name_;
    std::optional<std::string> old_;
};

}  // namespace kiln::test
