#include "targets/cpu/context.hpp"

#include "targets/cpu/kernels/team/team.hpp"
#include "targets/cpu/team_rule.hpp"

#include <kiln/errors.hpp>

#include <omp.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace kiln::cpu {

cpu_context::cpu_context(const compile_options& opts)
    : options_(read_cpu_options(opts)), engine_(dnnl::engine::kind::cpu, 0) {}

cpu_context::cpu_context(const cpu_context& parent, const compile_options& opts)
    : options_(parent.options_), engine_(dnnl::engine::kind::cpu, 0) {
    if (opts.threads > 0) options_.threads = opts.threads;
    options_.fast_math = opts.fast_math;
    options_.exhaustive_tune = opts.exhaustive_tune;
    tuning_ = parent.tuning_shared();
}

std::shared_ptr<tuning_table> cpu_context::tuning_shared() const {
    std::call_once(tuning_once_, [&] {
        if (!tuning_) tuning_ = std::make_shared<tuning_table>(options_.tuning_cache);
    });
    return tuning_;
}

dnnl::stream cpu_context::make_stream() { return dnnl::stream(engine_); }

dnnl::stream& cpu_context::stream() {
    std::lock_guard<std::mutex> lock(streams_mutex_);
    auto [it, inserted] = streams_.try_emplace(std::this_thread::get_id());
    if (inserted) it->second = dnnl::stream(engine_);
    return it->second;
}

std::shared_ptr<void> cpu_context::begin_run() { return std::make_shared<core_lease>(options_.threads); }

std::string cpu_context::run_note() const {
    std::string s = std::to_string(options_.threads) + (options_.threads == 1 ? " thread" : " threads");
    if (options_.threads <= 1) return s;
    const bool rule = runs_on_a_team();
    const team_parts_trial* trial = trial_.load(std::memory_order_acquire);
    const std::string measured = trial ? trial->note() : std::string();
    if (!rule) {
        // Off the team by the rule: a trial (when the options allow one) may put it on.
        if (measured.empty()) return s + ", an OpenMP region per kernel";
        return s + ", " + measured;
    }
    s += ", one team for the whole eval (a small program: team_rule.hpp)";
    switch (options_.team_parts) {
        case team_parts_choice::team:
            return s + ", parts spread over the team (KILN_CPU_TEAM_PARTS)";
        case team_parts_choice::caller:
            return s + ", parts on the calling thread (KILN_CPU_TEAM_PARTS)";
        case team_parts_choice::worker:
            return s + ", parts on a worker (KILN_CPU_TEAM_PARTS)";
        case team_parts_choice::measured:
            break;
    }
    return measured.empty() ? s : s + ", " + measured;
}

bool cpu_context::measures_ways() const {
    // A team program's parts, or whether another program runs better on a team (the team
    // is on or automatic); KILN_CPU_TEAM=0 or a fixed KILN_CPU_TEAM_PARTS measures nothing.
    return options_.threads > 1 && options_.team_parts == team_parts_choice::measured &&
           options_.team != team_choice::off;
}

bool cpu_context::warming_up() const {
    // The trial is made with the first eval (run_host).
    if (!measures_ways()) return false;
    const team_parts_trial* trial = trial_.load(std::memory_order_acquire);
    return !trial || !trial->measured();
}

void cpu_context::run_host(const module& main, function_ref<void()> work) {
    std::call_once(team_once_, [&] {
        const bool on = options_.team == team_choice::on ||
                        (options_.team == team_choice::automatic && cpu::runs_on_a_team(main, options_.threads));
        team_.store(on, std::memory_order_relaxed);
        if (measures_ways()) {
            trial_owner_ = std::make_unique<team_parts_trial>(!on);
            trial_.store(trial_owner_.get(), std::memory_order_release);
        }
    });
    team_parts_trial* trial = trial_.load(std::memory_order_acquire);
    if (!trial) {
        run_way(fixed_way(), work);
        return;
    }
    const eval_way way = trial->next();
    const auto start = std::chrono::steady_clock::now();
    run_way(way, work);
    trial->record(way, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

eval_way cpu_context::fixed_way() const {
    if (!team_.load(std::memory_order_relaxed)) return eval_way::no_team;
    switch (options_.team_parts) {
        case team_parts_choice::caller:
            return eval_way::caller;
        case team_parts_choice::worker:
            return eval_way::worker;
        default:
            return eval_way::spread;
    }
}

void cpu_context::run_way(eval_way way, function_ref<void()> work) {
    switch (way) {
        case eval_way::no_team:
            work();
            return;
        case eval_way::spread:
            team::run(options_.threads, work, team::parts_on::team);
            return;
        case eval_way::caller:
            team::run(options_.threads, work, team::parts_on::caller);
            return;
        case eval_way::worker:
            team::run(options_.threads, work, team::parts_on::worker);
            return;
    }
}

namespace {
struct core_budget {
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t in_use = 0;
    std::size_t total = process_cpu_options().threads;  // KILN_NUM_THREADS or the cores
};
core_budget& budget() {
    static core_budget b;
    return b;
}
}  // namespace

core_lease::core_lease(std::size_t threads) : threads_(threads) {
    auto& b = budget();
    std::unique_lock<std::mutex> lock(b.mutex);
    // Wait while others hold cores, unless nobody does (a request larger than the
    // machine still runs, alone).
    b.cv.wait(lock, [&] { return b.in_use == 0 || b.in_use + threads_ <= b.total; });
    b.in_use += threads_;
    omp_set_num_threads(static_cast<int>(threads_));
}

core_lease::~core_lease() {
    auto& b = budget();
    {
        std::lock_guard<std::mutex> lock(b.mutex);
        b.in_use -= threads_;
    }
    b.cv.notify_all();
}

tuning_table& cpu_context::tuning() { return *tuning_shared(); }

void cpu_context::note_instruction(const instruction* ins, std::string note) {
    std::lock_guard<std::mutex> lock(notes_mutex_);
    notes_[ins] = std::move(note);
}

std::string cpu_context::instruction_note(const instruction* ins) const {
    std::lock_guard<std::mutex> lock(notes_mutex_);
    auto it = notes_.find(ins);
    return it == notes_.end() ? std::string() : it->second;
}

}  // namespace kiln::cpu
