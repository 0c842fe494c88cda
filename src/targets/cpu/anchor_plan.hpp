// A convolution or matrix product with the post-ops it absorbs, as the cpu lowering
// plans it before any instruction changes (layouts are the ones the lowering will give
// the operands).
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/fusion.hpp"

#include <kiln/operation.hpp>

#include <optional>
#include <utility>
#include <vector>

namespace kiln::cpu {

struct anchor_plan {
    instruction_ref anchor;
    fused_chain chain;
    operation op;  // cpu::convolution or cpu::matmul, without its scratchpad
    std::vector<instruction_ref> operands;
    std::vector<shape> shapes;  // each operand's IR shape (the strides it must have, when plain)
    std::vector<std::optional<md_record>> wanted;  // or the oneDNN layout it must be in
    std::vector<std::size_t> vector_operands;  // per-channel constants to store as vectors
    std::optional<std::pair<std::size_t, float>> scaled_operand;  // a constant to store multiplied
    bool constant_weights = false;
    std::optional<std::size_t> dw_weights_operand;  // constant depthwise post-op weights
    shape dst;
};

}  // namespace kiln::cpu
