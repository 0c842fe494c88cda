// Helpers shared by the parse functions of the tensor (data movement, shape, indexing)
// family: constant inputs as ints, and folding of value-dependent ops whose inputs are
// all constants into literals (so their shapes are static downstream).
#pragma once
#include "onnx/onnx_node.hpp"
#include "ops/tensor_common.hpp"

#include <optional>
#include <vector>

namespace kiln::onnx_frontend {

// Input i as int64 values when it is a constant; nullopt when absent or computed at run time.
std::optional<std::vector<std::int64_t>> constant_ints(const onnx_node& node, std::size_t i);

// Adds op(args). When every arg is a constant, the result is computed now and added as
// literal(s) instead (for ops whose output shape depends on values). Returns one
// instruction per output (tuple results are split into `outputs` elements).
std::vector<instruction_ref> add_or_fold(const onnx_node& node, const operation& op, std::vector<instruction_ref> args,
                                         std::size_t outputs = 1);

// Whether input i is present and has a static shape with zero elements (ONNX's way of
// leaving out an optional tensor, e.g. Resize's empty scales).
bool is_empty_input(const onnx_node& node, std::size_t i);

}  // namespace kiln::onnx_frontend
