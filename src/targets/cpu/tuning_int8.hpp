// exhaustive_tune for the quantized convolutions (quant_convolution): the int8 kernels that
// can take one are measured as the anchors' candidates are (tuning.hpp), and the fastest
// lowers it where it beats the rules' kernel by the tuner's margin. Products (quant_dot)
// keep their rule: measured alone, oneDNN's int8 matmul won bert_small_qdq's trials and ran
// ~3x slower in the network (tuning_int8.cpp).
//
// On a CPU with a VNNI int8 dot product the candidates are oneDNN's int8 kernels
// (onednn_int8), Kiln's VNNI GEMM (int8_gemm_vnni: 1x1 and small-window convolutions)
// and Kiln's depthwise 3x3 kernel (int8_depthwise, whose
// AVX2 kernel is exact on any x86-64 with AVX2), each wherever it can take the instruction,
// whatever its rule says. Each one is lowered into a trial module of its own with the
// instruction's operands as buffers in the strides the program gives them (and the result
// channels-last or row-major as in the program), so the relayouts a kernel needs are
// measured with it. Without VNNI, dequantize_without_vnni has already given each product
// its one exact kernel or float ops: nothing is measured there.
//
// Only with KILN_CPU_INT8_KERNELS unset (automatic): its other settings choose the kernels.
// The choice is recorded in the context's tuning table (key: machine, the op's candidate
// names, the problem) and so in KILN_TUNING_CACHE.
#pragma once
#include "targets/cpu/lowering_util.hpp"

namespace kiln::cpu {

// With exhaustive_tune, lowers a quantized convolution with its measured (or recorded) fastest
// int8 kernel and notes the measurements on it; the kernel's name, or nullptr where fewer
// than two candidates can take it (the rules then decide, lower_op).
const char* lower_tuned_int8(lower_env& env, instruction_ref ins);

// Its key in the tuning table, "" for an instruction that is not tuned.
std::string int8_tuning_key(const lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
