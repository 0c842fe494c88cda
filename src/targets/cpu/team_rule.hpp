// Whether a compiled cpu program's evals run on a thread team (kernels/team/team.hpp).
//
// Inside a team, Kiln's kernels written for it (Winograd, conv_gemm, packed_gemm) get their
// parts by a flag to a spinning worker (0.7 us) instead of an OpenMP region each (2.8 us on a
// 2-vCPU Zen 5 VM), and every other kernel (oneDNN's primitives, the generated ones) runs on
// the calling thread alone. That pays only where those others are small: each one under
// 2^20 multiply-adds (about 10 us on one core, where a second thread saves at most half of
// that, less its own region) and 2^16 result values; where at least `min_team_kernels`
// kernels use the team and they are at least as many as the others (which run slower inside
// the team than alone: their buffers were last written by the other core, up to twice their
// one-thread time); and where the others that would have used both threads outside the team
// (over dnnl_util.hpp's single-thread sizes) are at most a quarter of the team kernels (each
// team kernel saves ~2.2 us, each such other loses up to half its time). fashion_resnet at
// batch 1 (10 team kernels, 7 others, 13 parallel regions in 0.15-0.2 ms) is such a program;
// its batch of 16, MobileNetV2, an LSTM, or torchvision's DeepLabV3 at a small image (4 team
// kernels among 80 other small instructions: 3.19 ms without the team, 3.56 with it before the
// count of others was a condition) are not (docs/performance.md, "A thread team for small
// programs").
#pragma once
#include <kiln/module.hpp>

#include <cstddef>

namespace kiln::cpu {

constexpr std::size_t min_team_kernels = 4;
constexpr std::size_t max_alone_macs = std::size_t{1} << 20;
constexpr std::size_t max_alone_values = std::size_t{1} << 16;
constexpr std::size_t others_per_team_kernel = 4;

// What the rule counts in a compiled main module: the kernels that use the team, the other
// instructions with work, and those of the others that would use both threads outside the
// team; `small` is false where any other is too big, dynamic, or a loop or branch.
struct team_census {
    std::size_t team_kernels = 0;
    std::size_t others = 0;
    std::size_t parallel_others = 0;
    bool small = true;
};
team_census census_of(const module& main);

// The rule above, for the main module of a program compiled for `threads` threads.
bool runs_on_a_team(const module& main, std::size_t threads);

}  // namespace kiln::cpu
