// The target-neutral half of the fused-kernel generator (src/codegen: plans, node
// expressions, content hashes), seen from the cpu target's codegen namespace.
#pragma once
#include "codegen/expr.hpp"
#include "codegen/hash.hpp"
#include "codegen/plan.hpp"

namespace kiln::cpu::codegen {
using namespace kiln::codegen;
}  // namespace kiln::cpu::codegen
