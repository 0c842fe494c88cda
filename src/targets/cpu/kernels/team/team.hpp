// cpu::team: one eval's kernels on a thread team held for the whole eval, handed their
// parts by a flag each way instead of an OpenMP parallel region per kernel.
//
// Why: on a 2-vCPU Zen 5 VM an empty OpenMP parallel region costs 2.8 us (libgomp's dock
// and end barriers: several cache lines cross the cores, ~0.45 us a round trip), where a
// flag to the spinning worker and one back cost 0.7 us. A small program's kernels take
// 5-25 us each (fashion_resnet at batch 1: 13 parallel regions in 0.19 ms), so the regions
// alone are a sixth of the run. Inside the team, oneDNN's primitives and the kernels not
// written for it run on the calling thread alone (OpenMP's nested regions get one thread).
#pragma once
#include <kiln/function_ref.hpp>

#include <cstddef>

namespace kiln::cpu::team {

// Kernels pass their parts as a lambda of the part number (never copied or allocated).
using part_function = function_ref<void(std::size_t)>;

// Where a team's parts run: spread over its members, or all in turn on the thread that runs
// the body: the caller, or the first worker (the caller waiting). The parts are the same
// every way (size() is the team's), so are the results, bit for bit; on one thread nothing
// crosses the cores, and oneDNN's primitives still run on one thread (inside the team's
// region). Which is fastest depends on what a cache line costs to cross between the cores
// and on how fast each core is (a VM's vCPUs need not be equal); team_parts_trial.hpp
// measures it.
enum class parts_on { team, caller, worker };

// Runs `body` on the calling thread while threads - 1 workers (OpenMP's, in one parallel
// region) wait for parts; parallel() inside body hands them out (with parts_on::caller runs
// them itself; parts_on::worker runs body and its parts on the first worker instead).
// Exceptions from body or from a worker's part reach the caller after the workers are
// released.
void run(std::size_t threads, function_ref<void()> body, parts_on where = parts_on::team);

// Whether the calling thread is running a team's body.
bool active();

// The team's size where active(), else 1.
std::size_t size();

// Runs f(part) for part in [0, parts): on the team where active() (part i on member
// i % size(), the caller being member 0), else on an OpenMP parallel region of at most
// `parts` threads (omp_get_max_threads()). Returns when every part has.
void parallel(std::size_t parts, part_function f);

// How many threads parallel() would use now: size() in a team, else omp_get_max_threads().
std::size_t threads();

}  // namespace kiln::cpu::team
