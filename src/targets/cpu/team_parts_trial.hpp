// Where a team program's kernel parts run (team.hpp's parts_on: spread over the team, or all
// on the calling thread, or all on the first worker), measured on the program's own evals
// instead of guessed.
//
// Why measured: which is fastest depends on what a cache line costs to cross between the
// cores and on how fast each core is, both the hypervisor's to decide, and both change while
// a process runs. On the 2-vCPU Zen 5 VM, fashion_resnet at batch 1 (`kiln perf -n 5000`):
// spread over the team 0.124 ms against 0.150 on one thread in some minutes, 0.19 against
// 0.15 in others, and one thread pinned to one vCPU 0.198 ms, to the other 0.148, in the same
// minutes (docs/performance.md, "Where a small program's parts run, measured"). Every way
// computes the same parts, so gives the same bits.
//
// How: after a few warm-up evals, a trial of `rounds` rounds, each a block of `block` evals
// every way in turn, so all see the same minutes; the first eval of a block is not counted
// (it finds the buffers where another way left them: alternating single evals made one
// thread look slower than it runs). The way with the lowest median runs the next `period`
// evals, then the trial repeats. A trial that confirms the last choice doubles the period
// (up to max_period), one that overturns it starts again from the shortest, so a steady
// machine pays for few trials and a change is seen within max_period evals.
#pragma once
#include "targets/cpu/kernels/team/team.hpp"

#include <array>
#include <cstddef>
#include <mutex>
#include <string>

namespace kiln::cpu {

class team_parts_trial {
public:
    static constexpr std::size_t ways = 3;  // parts_on::team, ::caller, ::worker
    static constexpr std::size_t warm_evals = 3;
    static constexpr std::size_t rounds = 3;
    static constexpr std::size_t block = 4;
    static constexpr std::size_t trial_evals = rounds * (block - 1);  // counted each way (9)
    static constexpr std::size_t min_period = 512;
    static constexpr std::size_t max_period = 32768;

    // Where the next eval's parts run.
    team::parts_on next();
    // How long an eval with its parts `where` took (seconds, wall clock).
    void record(team::parts_on where, double seconds);
    // Whether a trial is under way (the evals try each way in turn).
    bool in_trial() const;
    // The choice and the last trial's medians, e.g. "parts on the calling thread (measured:
    // 0.149 ms spread over the team, ...)"; "" before the first trial ends.
    std::string note() const;

private:
    enum class phase { warm, trial, settled };
    mutable std::mutex mutex_;
    phase phase_ = phase::warm;
    std::size_t left_ = warm_evals;  // evals left in the warm-up or the settled period
    std::size_t period_ = min_period;
    team::parts_on choice_ = team::parts_on::team;
    std::size_t handed_ = 0;                      // evals handed out in this trial
    team::parts_on last_ = team::parts_on::team;  // the way the last recorded eval ran
    std::array<std::array<double, trial_evals>, ways> samples_{};
    std::array<std::size_t, ways> counts_{};
    std::array<double, ways> medians_{};  // the last trial's, seconds; 0 before one ends
};

}  // namespace kiln::cpu
