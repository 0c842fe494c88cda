// Kernel selection as data for the gpu target, as for the cpu (src/targets/cpu/
// selection.hpp): the candidates in priority order, each with the ops it is for (prose),
// its kernel, its rule, and a lowering that takes the instruction or declines it. The
// lowering pass (lowering.hpp) walks the list; the first candidate that takes an
// instruction wins, and what none takes stays for the reference kernels.
#pragma once
#include "targets/gpu/context.hpp"

#include <kiln/module.hpp>

#include <string>
#include <vector>

namespace kiln::gpu {

struct candidate {
    const char* ops;     // which ops it is for, as the docs say it
    const char* kernel;  // "generated", "cublaslt", ...
    const char* rule;    // when it takes one
    // Replaces `ins` (in destination-passing style) and returns true, or leaves it.
    bool (*lower)(module& m, instruction_ref ins, const gpu_options& o);
};

const std::vector<candidate>& candidates();

// Lowers `ins` with the first candidate that takes it; its kernel's name, or "" (the
// reference kernel then runs it).
std::string lower_instruction(module& m, instruction_ref ins, const gpu_options& o);

// The attention candidate (anchored at a softmax): gpu::fuse_attention runs it over the
// module before fusion, which would otherwise group its scale and mask add.
bool lower_attention(module& m, instruction_ref ins, const gpu_options& o);

// The LSTM candidate (lower_lstm.cpp): cuBLASLt input projection + one generated recurrence.
bool lower_lstm(module& m, instruction_ref ins, const gpu_options& o);

// The list as a markdown table (ops, kernel, rule), in priority order.
std::string selection_table();

}  // namespace kiln::gpu
