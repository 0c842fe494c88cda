// Options of program::compile, with the meanings MIGraphX users know.
#pragma once
#include <cstddef>

namespace kiln {

struct compile_options {
    // On: eval takes and returns host buffers (the target copies to and from its device).
    // Off: the caller passes and receives the target's (device) buffers.
    bool offload_copy = true;
    int device_id = 0;
    // Faster approximations of exp, erf, tanh, sigmoid and division (within 1e-5 relative).
    bool fast_math = true;
    // Time candidate kernels and keep the fastest, instead of using heuristics.
    bool exhaustive_tune = false;
    // Plan intermediate buffers into one arena. Off only for tests and debugging.
    bool memory_planning = true;
    // Worker threads for the cpu target; 0 = KILN_NUM_THREADS or the machine's cores.
    std::size_t threads = 0;
    // Programs with dynamic inputs: how many specializations (one compiled program per
    // set of input shapes) stay cached; the least recently used one is dropped beyond
    // that, and its memory is freed once no running eval holds it. 0 = unbounded.
    std::size_t max_specializations = 8;
};

}  // namespace kiln
