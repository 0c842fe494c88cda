// Runs a fused group without machine code (no compiler, or an object for another CPU):
// the same plan as the generated kernel, evaluated tile by tile (up to 256 elements),
// each node as one tight loop over the tile that calls the op's own scalar apply
// function, so the results equal the reference kernels' (reductions aside, which add in
// double in a different order). Values are held as float (bool as 0 and 1).
#pragma once
#include "targets/cpu/codegen/shared.hpp"

#include <cstddef>

namespace kiln::cpu::codegen {

// Computes work units [begin, end) of `p` (same contract as a generated kernel).
void interpret(const plan& p, const void* const* in, void* out, std::size_t begin, std::size_t end);

}  // namespace kiln::cpu::codegen
