// Buffers of a generic program's runs, kept for its next runs. The instructions of a
// generic program get their shapes as they run and allocate their results then; a decode
// loop or a server calls it again and again with similar shapes, so an allocation takes
// the smallest kept buffer that is free (no step or caller holds it any more) and large
// enough, and a new buffer replaces the largest free one too small (the set grows to the
// sizes seen, at most as many buffers as were live at once). A warm run so allocates
// nothing from the system (its outputs aside, which the caller owns).
#pragma once
#include <kiln/allocation_limit.hpp>

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::detail {

class buffer_recycler {
public:
    // A buffer of at least `bytes` for this run's next allocation, or null: then the caller
    // allocates one and hands it to keep().
    std::shared_ptr<char> take(std::size_t bytes);
    void keep(const std::shared_ptr<char>& buffer, std::size_t bytes);

private:
    struct slot {
        std::shared_ptr<char> buffer;
        std::size_t bytes = 0;
    };
    static constexpr std::size_t max_slots = 1024;
    std::vector<slot> slots_;
};

// Recyclers of one program, one per eval running at once.
class recycler_pool {
public:
    std::unique_ptr<buffer_recycler> acquire();
    void release(std::unique_ptr<buffer_recycler> r);
    // Frees the buffers of every recycler no eval holds (the next runs allocate afresh).
    void clear();

private:
    std::mutex mutex_;
    std::vector<std::unique_ptr<buffer_recycler>> free_;
};

// While alive, tensor buffers allocated on this thread (argument's constructor) come from
// and go to `r` (null: from the system, as outside any scope).
class recycling_scope {
public:
    explicit recycling_scope(buffer_recycler* r);
    ~recycling_scope();
    recycling_scope(const recycling_scope&) = delete;
    recycling_scope& operator=(const recycling_scope&) = delete;

private:
    buffer_recycler* previous_;
};

buffer_recycler* active_recycler();
// Buffers this thread allocated from the system so far (for tests: a warm run adds none).
std::size_t fresh_allocations();
void count_fresh_allocation();
// This thread's allocation_limit (kiln/allocation_limit.hpp; the largest size_t where none).
std::size_t thread_allocation_limit();

// What an eval's allocations read from their thread (the recycler, the allocation limit) and
// count there (fresh allocations), captured on the thread that calls eval. A target may run
// the eval on another thread (the cpu target's team, on its worker: team_parts_trial.hpp), so
// program::eval puts this in place around the eval wherever it runs.
class eval_thread_state {
public:
    eval_thread_state();
    // While alive, the thread it is made on allocates as the capturing thread would.
    class scope {
    public:
        explicit scope(eval_thread_state& state);
        ~scope();
        scope(const scope&) = delete;
        scope& operator=(const scope&) = delete;

    private:
        eval_thread_state& state_;
        bool elsewhere_;
        std::size_t fresh_before_;
        recycling_scope recycling_;
        std::unique_ptr<allocation_limit> limit_;
    };
    // On the capturing thread after the eval: adds the fresh allocations counted elsewhere.
    void settle();

private:
    std::thread::id owner_;
    buffer_recycler* recycler_;
    std::size_t limit_;
    std::atomic<std::size_t> fresh_elsewhere_{0};
};

}  // namespace kiln::detail
