// Options of program::compile, with the meanings MIGraphX users know.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace kiln {

// Sizes of one named input dim worth a compiled program each (compile_options::
// dynamic_buckets).
struct dim_buckets {
    std::string dim;                 // the dim's name as the inputs spell it ("batch")
    std::vector<std::size_t> sizes;  // each compiled ahead; a call in between is padded up
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.dim, "dim");
        f(self.sizes, "sizes");
    }
};

struct compile_options {
    // On: eval takes and returns host buffers (the target copies to and from its device).
    // Off: the caller passes and receives the target's (device) buffers.
    bool offload_copy = true;
    int device_id = 0;
    // Faster approximations of exp, erf, tanh, sigmoid and division (within 1e-5 relative).
    bool fast_math = true;
    // Time candidate kernels and keep the fastest, instead of using heuristics.
    bool exhaustive_tune = false;
    // The gpu target: the CUDA architecture its kernels are compiled for ("sm_90"); "" for
    // KILN_GPU_ARCH, else the build's first KILN_CUDA_ARCHS. Compiling needs no device.
    std::string gpu_arch;
    // The gpu target: float32 products (cuBLASLt) and convolutions (cuDNN) may run on TF32
    // tensor cores (10-bit mantissa inputs, fp32 sums). Off: strict fp32.
    bool tf32 = false;
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
    // generic program runs every shape); the inputs' optimals are compiled at compile(),
    // unless this is 0. Where a target cannot build a generic program, every new set of
    // shapes is specialized on its first call, as that call's compile.
    std::size_t specialize_after = 2;
    // Programs with dynamic inputs: for a named dim, sizes compiled ahead like optimals
    // (a server's batch 1, 2, 4, 8). A call whose size lies between two buckets runs on
    // the next larger bucket's program, its inputs padded (the last row repeated) and its
    // outputs cut back, when the program treats that dim as independent rows (every op
    // maps row i to row i: docs/architecture.md lists the ops); otherwise it runs as any
    // other shape does. Bounds memory to the buckets' programs for any mix of sizes.
    std::vector<dim_buckets> dynamic_buckets;
};

}  // namespace kiln
