// Part of libkiln itself (the rest of this folder is the gpu module, libkiln_gpu): makes
// `gpu` a known target name in every build.
// - Built with CUDA (cmake/KilnGpu.cmake): the target lives in its own library, loaded by
//   the first get_target("gpu"), so that a process that never asks for the gpu target never
//   maps the CUDA libraries (their start-up cost, ~0.7 s, was paid by every CLI call and
//   `import kiln`), and a machine without them still runs the cpu target.
// - Built without: a target that says why it cannot run, rather than an unknown name.
#include <kiln/target.hpp>

namespace kiln::gpu {

namespace {

const bool registered = [] {
#ifdef KILN_GPU_MODULE
    register_target_module("gpu", KILN_GPU_MODULE);
#else
    register_target(make_unavailable_target("gpu", "built without CUDA"));
#endif
    return true;
}();

}  // namespace

}  // namespace kiln::gpu
