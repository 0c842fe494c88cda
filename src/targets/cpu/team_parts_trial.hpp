// How a program's evals run, measured on its own evals instead of guessed: without a team
// (an OpenMP region per kernel, oneDNN's primitives on every thread), or on a team
// (kernels/team/team.hpp) with the kernels' parts spread over it, all on the calling thread,
// or all (with the eval) on the first worker (team::parts_on).
//
// Why measured: which is fastest depends on what a cache line costs to cross between the
// cores and on how fast each core is, both the hypervisor's to decide, and both change while
// a process runs. On the 2-vCPU Zen 5 VM, fashion_resnet at batch 1 (`kiln perf -n 5000`):
// spread over the team 0.124 ms against 0.150 on one thread in some minutes, 0.19 against
// 0.15 in others, and one thread pinned to one vCPU 0.198 ms, to the other 0.148, in the same
// minutes (docs/performance.md, "Where a small program's parts run, measured"). The team ways
// compute the same parts, so give the same bits; without a team oneDNN's primitives run on
// every thread instead of one, which gave the same bits on every program tried (ibid.).
//
// How: after a few warm-up evals, a trial of `rounds` rounds, each a block of `block` evals
// every way in turn, so all see the same minutes; the first eval of a block is not counted
// (it finds the buffers where another way left them: alternating single evals made one
// thread look slower than it runs). A way whose counted evals are all over drop_ratio times
// the fastest eval of another way is dropped (so a program where one way is clearly best
// pays for one block of each other way; a trial ends when one way is left), and so is a way
// one of whose evals, counted or not, took over drop_ratio times another's fastest plus
// preemption_s: a preemption can hold up a single eval by about a scheduler slice, not more,
// so where evals take milliseconds (resnet50: 21 ms without a team, 31-40 ms each team way)
// a way that cannot win costs one eval, not a block (`kiln perf -n 20` read a 31 ms median
// where the evals ran in 21). The way with the lowest median runs the next `period` evals,
// then the trial repeats. A trial that confirms the last choice doubles the period (up to
// max_period; straight to it where every other way was dropped), one that overturns it
// starts again from the shortest, so a steady machine pays for few trials and a change is
// seen within max_period evals. Until the first trial ends, the context is warming up
// (`kiln perf` and `kiln serve`'s warm-up run evals until it has).
#pragma once
#include "targets/cpu/kernels/team/team.hpp"

#include <array>
#include <cstddef>
#include <mutex>
#include <string>

namespace kiln::cpu {

enum class eval_way { no_team, spread, caller, worker };

class team_parts_trial {
public:
    static constexpr std::size_t all_ways = 4;
    static constexpr std::size_t warm_evals = 3;
    static constexpr std::size_t rounds = 3;
    static constexpr std::size_t block = 4;
    static constexpr std::size_t trial_evals = rounds * (block - 1);  // counted each way (9)
    static constexpr double drop_ratio = 1.5;
    static constexpr double preemption_s = 1e-3;  // what one preemption can add to one eval
    static constexpr std::size_t min_period = 512;
    static constexpr std::size_t max_period = 32768;

    // `with_no_team`: running without a team is a way too, and the one the evals start with
    // (a program the team rule leaves off the team); else the team ways only, spread first.
    explicit team_parts_trial(bool with_no_team = false);

    // How the next eval runs.
    eval_way next();
    // How long an eval that ran `way` took (seconds, wall clock).
    void record(eval_way way, double seconds);
    // Whether a trial is under way (the evals try each way in turn).
    bool in_trial() const;
    // Whether the first trial has ended (before it, some evals run a slower way on purpose).
    bool measured() const;
    // The choice and the last trial's medians, e.g. "parts on the calling thread (measured:
    // 0.218 ms spread over the team, 0.152 ms on the calling thread, 0.228 ms on a worker)"
    // or "an OpenMP region per kernel (measured: 1.000 ms without a team, 2.000 ms spread
    // over the team (dropped), ...)"; "" before the first trial ends.
    std::string note() const;

private:
    enum class phase { warm, trial, settled };
    bool done(std::size_t i) const;
    void maybe_drop(std::size_t i);
    bool clearly_slower(std::size_t i, double seconds) const;
    void decide();

    std::size_t first_;  // the first way tried (0: no_team, 1: spread)
    mutable std::mutex mutex_;
    phase phase_ = phase::warm;
    std::size_t left_ = warm_evals;  // evals left in the warm-up or the settled period
    std::size_t period_ = min_period;
    eval_way choice_;
    std::size_t handed_ = 0;  // evals handed out in this trial
    eval_way last_;           // the way the last recorded eval ran
    std::array<std::array<double, trial_evals>, all_ways> samples_{};
    std::array<std::size_t, all_ways> counts_{};
    std::array<bool, all_ways> dropped_{};
    std::array<double, all_ways> medians_{};  // the last trial's, seconds; 0 before one ends
    bool measured_ = false;
};

}  // namespace kiln::cpu
