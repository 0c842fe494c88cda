// Per-compiled-program execution state of a target: streams, thread pool, library
// handles. Target kernels receive it in compute(); `finish` waits for queued work.
#pragma once
#include <kiln/argument.hpp>
#include <kiln/function_ref.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

class module;

class instruction;

class context {
public:
    virtual ~context() = default;
    virtual std::string target_name() const = 0;
    // Blocks until all work queued on the context's stream is done (device targets).
    virtual void finish() {}
    // Called at the start of each eval; the returned token is released when the eval
    // ends (the cpu target holds its cores with it).
    virtual std::shared_ptr<void> begin_run() { return nullptr; }
    // What the target has to say about one of its compiled instructions, for profiles
    // (the cpu target: the kernel exhaustive_tune chose and what the others measured).
    virtual std::string instruction_note(const instruction*) const { return {}; }
    // Runs one eval of the program whose main module is `main` (its work) on the calling
    // thread. A host target may hold threads for it meanwhile (the cpu target: a thread
    // team its kernels share, for small programs: targets/cpu/team_rule.hpp).
    virtual void run_host(const module& main, function_ref<void()> work) {
        (void)main;
        work();
    }
    // How the target runs this program's evals, for `kiln perf` (the cpu target: its
    // threads, and whether they run as a team, which its first eval decides); "" where the
    // target has nothing to say.
    virtual std::string run_note() const { return {}; }
    // Whether the target is still trying out how to run this program's evals, so that some
    // of them run a slower way on purpose (the cpu target's first trial of running on a
    // thread team or not: targets/cpu/team_parts_trial.hpp). Benchmarks warm up until it
    // is false; an application need not care (the trial costs a few evals once).
    virtual bool warming_up() const { return false; }
    // Whether run_eval may replay recorded work (then the caller builds its key).
    virtual bool records_evals() const { return false; }
    // One eval's work: `enqueue` queues it and returns its results. A device target may
    // record what `enqueue` queues and, on a later eval with the same `key`, replay the
    // recording instead of calling `enqueue` (the gpu target: CUDA graphs). The key names
    // every buffer the work reads or writes by address and shape (the arena, the inputs),
    // so a replay computes what `enqueue` would, into the same buffers.
    virtual std::vector<argument> run_eval(const std::string& key, const std::function<std::vector<argument>()>& enqueue) {
        (void)key;
        return enqueue();
    }
};

// The context of targets that need no state (ref, and eval of uncompiled programs).
class host_context final : public context {
public:
    std::string target_name() const override { return "ref"; }
};

}  // namespace kiln
