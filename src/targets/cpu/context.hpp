// Execution state of the cpu target: the oneDNN engine and stream, and the options
// (cpu_options.hpp: worker threads, fast math, every switch) read once when it is made. Kernels (oneDNN's and Kiln's generated ones) run on one OpenMP pool;
// a process-wide core lease keeps concurrent evals from oversubscribing the cores.
#pragma once
#include "targets/cpu/cpu_options.hpp"
#include "targets/cpu/team_parts_trial.hpp"
#include "targets/cpu/tuning_table.hpp"

#include <kiln/compile_options.hpp>
#include <kiln/context.hpp>

#include <dnnl.hpp>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace kiln::cpu {

class cpu_context final : public context {
public:
    explicit cpu_context(const compile_options& opts);
    // For a program compiled on behalf of `parent`'s (a specialization): its options,
    // with opts' threads (when set), fast_math and exhaustive_tune, and its tuning table.
    cpu_context(const cpu_context& parent, const compile_options& opts);
    std::string target_name() const override { return "cpu"; }

    // The switches the lowering and the kernels follow, read when this context was made.
    const cpu_options& options() const { return options_; }
    std::size_t threads() const { return options_.threads; }
    bool fast_math() const { return options_.fast_math; }
    dnnl::engine& engine() { return engine_; }
    // A stream for the calling thread's eval (oneDNN streams are not shared across
    // threads that execute concurrently).
    dnnl::stream make_stream();
    // The calling thread's stream on this context's engine, created on first use.
    dnnl::stream& stream();
    std::shared_ptr<void> begin_run() override;
    // Small programs' evals on a thread team (team_rule.hpp; KILN_CPU_TEAM decides instead),
    // their kernel parts spread over it or on one of its threads as team_parts_trial measures;
    // other programs measure whether they run faster on a team.
    void run_host(const module& main, function_ref<void()> work) override;
    // Whether this context's evals run on a team (known after its first eval).
    bool runs_on_a_team() const { return team_.load(std::memory_order_relaxed); }
    std::string run_note() const override;
    bool warming_up() const override;
    // exhaustive_tune's choices (tuning.hpp), loaded from options().tuning_cache on first use.
    tuning_table& tuning();
    std::shared_ptr<tuning_table> tuning_shared() const;
    // Notes on compiled instructions (instruction_note): the tuner's choice and measurements.
    void note_instruction(const instruction* ins, std::string note);
    std::string instruction_note(const instruction* ins) const override;
    // The program's convolutions were bfloat16 and this CPU runs them natively: oneDNN's
    // convolutions take bf16 source and weights (widen_reduced.hpp sets it while compiling).
    bool bf16_convolutions = false;
    // The same for matrix products with constant weights: cpu::packed_gemm's bf16 kernels.
    bool bf16_matmuls = false;

private:
    // How an eval runs where nothing is measured: the team rule's answer and KILN_CPU_TEAM_PARTS.
    // Whether the options let the evals measure their way (team_parts_trial.hpp).
    bool measures_ways() const;
    eval_way fixed_way() const;
    void run_way(eval_way way, function_ref<void()> work);

    cpu_options options_;
    mutable std::once_flag tuning_once_;
    mutable std::shared_ptr<tuning_table> tuning_;
    mutable std::mutex notes_mutex_;
    std::unordered_map<const instruction*, std::string> notes_;
    dnnl::engine engine_;
    std::mutex streams_mutex_;
    std::unordered_map<std::thread::id, dnnl::stream> streams_;
    std::once_flag team_once_;
    std::atomic<bool> team_{false};
    // How the evals run, measured (team_parts_trial.hpp): made with the first eval, where
    // the options leave it to measurement.
    std::unique_ptr<team_parts_trial> trial_owner_;
    std::atomic<team_parts_trial*> trial_{nullptr};
};

// Holds the machine's worker threads for the duration of one eval: a second eval
// running at the same time waits rather than splitting the cores into thrashing teams.
class core_lease {
public:
    explicit core_lease(std::size_t threads);
    ~core_lease();
    core_lease(const core_lease&) = delete;
    core_lease& operator=(const core_lease&) = delete;

private:
    std::size_t threads_;
};

}  // namespace kiln::cpu
