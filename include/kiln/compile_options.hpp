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
    // Programs with dynamic inputs are compiled once for their whole ranges (the generic
    // program: shapes stay symbolic, each call's shapes are worked out as it runs). A set
    // of input shapes that comes back this many times also gets a specialization of its
    // own, compiled in the background while the generic program serves its calls; shapes
    // at the inputs' optimals get one on their first call. 0 = never specialize (the
    // generic program runs every shape). Where a target cannot build a generic program,
    // every new set of shapes is specialized on its first call, as that call's compile.
    std::size_t specialize_after = 2;
};

}  // namespace kiln
