// The oneDNN forms of the ops that are not convolutions or matrix products: each replaces
// `ins` by its cpu:: op and returns true, or changes nothing and returns false (oneDNN has
// no kernel for it; selection.cpp then tries the next candidate, or the reference kernel).
#pragma once
#include "targets/cpu/lowering_util.hpp"

#include <string>

namespace kiln::cpu {

bool lower_pooling(lower_env& env, instruction_ref ins);
// Max pooling of a static 8-bit tensor in its IR strides (fuse_qdq's pools of quantized CNNs).
bool lower_pooling_8bit(lower_env& env, instruction_ref ins);
bool lower_softmax(lower_env& env, instruction_ref ins, bool log);
bool lower_layer_norm(lower_env& env, instruction_ref ins);
bool lower_batch_norm(lower_env& env, instruction_ref ins);
bool lower_lrn(lower_env& env, instruction_ref ins);
bool lower_reduce(lower_env& env, instruction_ref ins, const std::string& n);
bool lower_concat(lower_env& env, instruction_ref ins);
bool lower_resize(lower_env& env, instruction_ref ins);
// add, sub, mul, div, max, min (`n`) with numpy broadcasting.
bool lower_binary(lower_env& env, instruction_ref ins, const std::string& n);
bool lower_eltwise(lower_env& env, instruction_ref ins);
bool lower_gather(lower_env& env, instruction_ref ins);
// A reshape or flatten whose input is not row-major (a copy into row-major order).
bool lower_reshape_copy(lower_env& env, instruction_ref ins);
// An ONNX GRU (default activations, no clip or sequence lengths, time-major, constant
// weights) on oneDNN's GRU primitive (cpu::gru, op_rnn.cpp); Y and Y_h are views and
// copies of its result, and the tuple and its elements go to env.dead.
bool lower_gru_onednn(lower_env& env, instruction_ref ins);
// An ONNX RNN (one activation for all directions: Relu, Tanh or Sigmoid; no clip, sequence
// lengths or batch-major layout; constant weights) on oneDNN's vanilla RNN primitive
// (cpu::rnn, op_rnn.cpp), Y and Y_h as for the GRU.
bool lower_rnn_onednn(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
