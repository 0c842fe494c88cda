#include "targets/cpu/tuning_table.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

namespace kiln::cpu {

namespace {

// Keys and names never hold the file's separators.
std::string clean(std::string s) {
    for (auto& c : s)
        if (c == '\t' || c == '\n' || c == '\r') c = ' ';
    return s;
}

void load_into(const std::string& path, std::map<std::string, tuning_record>& out) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        const auto t1 = line.find('\t');
        const auto t2 = t1 == std::string::npos ? t1 : line.find('\t', t1 + 1);
        if (t2 == std::string::npos) continue;
        tuning_record r;
        r.chosen = line.substr(t1 + 1, t2 - t1 - 1);
        if (r.chosen.empty()) continue;
        std::istringstream ms(line.substr(t2 + 1));
        for (std::string item; ms >> item;) {
            const auto eq = item.find('=');
            if (eq == std::string::npos) continue;
            try {
                r.ms.emplace_back(item.substr(0, eq), std::stod(item.substr(eq + 1)));
            } catch (const std::exception&) {
            }
        }
        out.emplace(line.substr(0, t1), std::move(r));
    }
}

}  // namespace

tuning_table::tuning_table(std::string path) : path_(std::move(path)) {
    if (!path_.empty()) load_into(path_, entries_);
}

std::optional<tuning_record> tuning_table::find(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = entries_.find(clean(key));
    if (it == entries_.end()) return std::nullopt;
    return it->second;
}

void tuning_table::record(const std::string& key, tuning_record r) {
    std::lock_guard<std::mutex> lock(mutex_);
    r.chosen = clean(r.chosen);
    entries_[clean(key)] = std::move(r);
    dirty_ = true;
}

std::size_t tuning_table::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_.size();
}

void tuning_table::save() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (path_.empty() || !dirty_) return;
    // What others wrote meanwhile, then ours over it.
    std::map<std::string, tuning_record> all;
    load_into(path_, all);
    for (const auto& [k, r] : entries_) all[k] = r;
    const std::string tmp = path_ + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream out(tmp, std::ios::trunc);
        for (const auto& [k, r] : all) {
            out << k << '\t' << r.chosen << '\t';
            for (std::size_t i = 0; i < r.ms.size(); ++i)
                out << (i ? " " : "") << clean(r.ms[i].first) << '=' << r.ms[i].second;
            out << '\n';
        }
        out.flush();
        if (!out) {
            std::remove(tmp.c_str());
            std::cerr << "[kiln] cannot write the tuning cache " << path_ << "\n";
            return;
        }
    }
    if (std::rename(tmp.c_str(), path_.c_str()) != 0) {
        std::remove(tmp.c_str());
        std::cerr << "[kiln] cannot write the tuning cache " << path_ << "\n";
        return;
    }
    dirty_ = false;
}

}  // namespace kiln::cpu
