// The per-shape kernels of a generic program's instruction (cpu::dyn_primitive,
// cpu::dyn_recurrent), by a key of their operands' shapes, most recently used first, at most
// `capacity` kept. Entries are made outside the lock: two threads that meet the same new
// shape both make one; both are kept until the older one falls out.
#pragma once
#include <kiln/shape.hpp>

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>

namespace kiln::cpu {

template <class Entry>  // an Entry has `std::string key`
class shape_cache {
public:
    // The entry for `key`, moved to the front; null when there is none.
    std::shared_ptr<const Entry> find(const std::string& key) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (auto it = entries_.begin(); it != entries_.end(); ++it)
            if ((*it)->key == key) {
                entries_.splice(entries_.begin(), entries_, it);
                return entries_.front();
            }
        return nullptr;
    }
    void add(std::shared_ptr<const Entry> e, std::size_t capacity) {
        std::lock_guard<std::mutex> lock(mutex_);
        entries_.push_front(std::move(e));
        while (entries_.size() > capacity) entries_.pop_back();
    }
    // f(entry) for every entry, under the lock (f must not call back into the cache).
    template <class F>
    void for_each(F f) const {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& e : entries_) f(*e);
    }
    std::size_t size() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return entries_.size();
    }

private:
    mutable std::mutex mutex_;
    std::list<std::shared_ptr<const Entry>> entries_;
};

// Appends s's dims and strides to a cache key.
inline void append_shape_key(std::string& key, const shape& s) {
    for (auto d : s.lens()) key += std::to_string(d) + ',';
    key += '/';
    for (auto d : s.strides()) key += std::to_string(d) + ',';
    key += ';';
}

}  // namespace kiln::cpu
