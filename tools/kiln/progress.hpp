// A spinner on stderr for steps that take over a second (compiling, calibrating);
// silent when stderr is not a terminal or with --quiet.
#pragma once
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace kiln::cli {

class spinner {
public:
    spinner(std::string what, bool quiet) : what_(std::move(what)) {
        if (quiet || isatty(STDERR_FILENO) == 0) return;
        thread_ = std::thread([this] { spin(); });
    }
    ~spinner() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            done_ = true;
        }
        cv_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    spinner(const spinner&) = delete;
    spinner& operator=(const spinner&) = delete;

private:
    void spin() {
        const char* frames = "|/-\\";
        auto start = std::chrono::steady_clock::now();
        std::unique_lock<std::mutex> lock(mutex_);
        if (cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; })) return;
        for (int i = 0; !done_; ++i) {
            auto s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            std::fprintf(stderr, "\r%c %s (%.0f s)", frames[i % 4], what_.c_str(), s);
            std::fflush(stderr);
            cv_.wait_for(lock, std::chrono::milliseconds(150), [this] { return done_; });
        }
        std::fprintf(stderr, "\r%*s\r", static_cast<int>(what_.size() + 16), "");
        std::fflush(stderr);
    }
    std::string what_;
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
};

}  // namespace kiln::cli
