#include "targets/cpu/kernels/team/team.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KILN_TEAM_PAUSE() _mm_pause()
#else
#define KILN_TEAM_PAUSE() ((void)0)
#endif

namespace kiln::cpu::team {

namespace {

// A worker's `done` on a cache line of its own (the caller's `start` is on another).
struct alignas(64) member_flags {
    std::atomic<std::uint64_t> done{0};
};

struct state {
    alignas(64) std::atomic<std::uint64_t> start{0};  // the number of the job (or quit) posted last
    alignas(64) const part_function* job = nullptr;
    std::size_t parts = 0;
    bool quit = false;
    std::size_t size = 1;
    bool parts_inline = false;  // parts_on::caller or ::worker: parts run where the body does
    std::vector<member_flags> members;
    std::mutex error_mutex;
    std::exception_ptr error;
};

thread_local state* current = nullptr;
// Set while this thread runs a part: a parallel() inside a part runs its parts here, in turn
// (posting a job while one is out would confuse the flags).
thread_local bool in_part = false;

struct part_scope {
    part_scope() { in_part = true; }
    ~part_scope() { in_part = false; }
};

void record(state& s) {
    std::lock_guard<std::mutex> lock(s.error_mutex);
    if (!s.error) s.error = std::current_exception();
}

void run_parts(state& s, std::size_t member) {
    part_scope scope;
    for (std::size_t p = member; p < s.parts; p += s.size) (*s.job)(p);
}

void worker(state& s, std::size_t member) {
    std::uint64_t seen = 0;
    for (;;) {
        std::uint64_t now;
        while ((now = s.start.load(std::memory_order_acquire)) == seen) KILN_TEAM_PAUSE();
        seen = now;
        if (s.quit) return;
        try {
            run_parts(s, member);
        } catch (...) {
            record(s);
        }
        s.members[member].done.store(now, std::memory_order_release);
    }
}

// Posts the job (or quit) and waits for every worker to finish it.
void post(state& s, bool quit, const part_function* job, std::size_t parts) {
    s.job = job;
    s.parts = parts;
    s.quit = quit;
    const std::uint64_t n = s.start.load(std::memory_order_relaxed) + 1;
    s.start.store(n, std::memory_order_release);
    if (quit) return;
    try {
        run_parts(s, 0);
    } catch (...) {
        record(s);
    }
    for (std::size_t m = 1; m < s.size; ++m)
        while (s.members[m].done.load(std::memory_order_acquire) != n) KILN_TEAM_PAUSE();
}

}  // namespace

bool active() { return current != nullptr; }

std::size_t size() { return current ? current->size : 1; }

std::size_t threads() { return current ? current->size : static_cast<std::size_t>(omp_get_max_threads()); }

void run(std::size_t threads, function_ref<void()> body, parts_on where) {
    // Inside another parallel region, or where nested regions would get threads of their
    // own (OMP_MAX_ACTIVE_LEVELS above 1: oneDNN's regions inside the team would oversubscribe
    // the cores), no team.
    if (threads <= 1 || current || omp_in_parallel() || omp_get_max_active_levels() > 1) {
        body();
        return;
    }
    auto s = std::make_unique<state>();
    s->members = std::vector<member_flags>(threads);
    s->parts_inline = where != parts_on::team;
    std::exception_ptr body_error;
#pragma omp parallel num_threads(static_cast<int>(threads))
    {
        const auto id = static_cast<std::size_t>(omp_get_thread_num());
        if (id == 0) {
            // The team as OpenMP gave it (fewer threads where it had fewer to give).
            s->size = static_cast<std::size_t>(omp_get_num_threads());
        }
#pragma omp barrier
        // The member that runs the body: the caller, or with parts_on::worker the first worker
        // (the caller then waits as a worker would, for the quit).
        const std::size_t runner = where == parts_on::worker && s->size > 1 ? 1 : 0;
        if (id == runner) {
            current = s.get();
            try {
                body();
            } catch (...) {
                body_error = std::current_exception();
            }
            current = nullptr;
            post(*s, true, nullptr, 0);
        } else if (id < s->size) {
            worker(*s, id);
        }
    }
    if (body_error) std::rethrow_exception(body_error);
    if (s->error) std::rethrow_exception(s->error);
}

void parallel(std::size_t parts, part_function f) {
    if (parts == 0) return;
    if (in_part || (current && (parts == 1 || current->size == 1 || current->parts_inline))) {
        for (std::size_t p = 0; p < parts; ++p) f(p);
        return;
    }
    if (current) {
        post(*current, false, &f, parts);
        if (current->error) {
            auto e = current->error;
            current->error = nullptr;
            std::rethrow_exception(e);
        }
        return;
    }
    if (parts == 1) {
        f(0);
        return;
    }
    const int team = static_cast<int>(std::min<std::size_t>(parts, static_cast<std::size_t>(omp_get_max_threads())));
    std::exception_ptr error;
    std::mutex error_mutex;
#pragma omp parallel num_threads(team)
    {
        const auto id = static_cast<std::size_t>(omp_get_thread_num());
        const auto nt = static_cast<std::size_t>(omp_get_num_threads());
        for (std::size_t p = id; p < parts; p += nt) {
            try {
                f(p);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex);
                if (!error) error = std::current_exception();
            }
        }
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace kiln::cpu::team
