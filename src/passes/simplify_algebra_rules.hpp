// The rewrite rules of simplify_algebra, one function per rule, each trying to rewrite
// one instruction and returning whether it did. Internal to src/passes.
#pragma once
#include <kiln/module.hpp>

namespace kiln::algebra {

// simplify_algebra_fold.cpp: folds into convolution / deconvolution / gemm weights.
bool fold_batch_norm(module& m, instruction_ref ins);
bool fold_affine_into_weights(module& m, instruction_ref ins);

// simplify_algebra.cpp: constant arithmetic.
bool reassociate_constants(module& m, instruction_ref ins);
bool divide_by_reciprocal(module& m, instruction_ref ins, bool fast_math);
bool remove_identity(module& m, instruction_ref ins, bool fast_math);
bool scale_after_matmul(module& m, instruction_ref ins, bool fast_math);

// simplify_algebra_pad.cpp: Pad of nothing, and zero Pad into a convolution's or average
// pooling's own padding.
bool remove_zero_pad(module& m, instruction_ref ins);
bool fold_pad_into_window(module& m, instruction_ref ins);

// simplify_algebra_shuffle.cpp: a channel shuffle (reshape, transpose, reshape) as a gather
// of constant channels, and a slice of such a gather as a gather of its own.
bool channel_shuffle_to_gather(module& m, instruction_ref ins);
bool slice_of_gather(module& m, instruction_ref ins);

// simplify_algebra_select.cpp: a unary elementwise op after a gather instead of before it
// (the op then runs on the gathered elements only). Also for dynamic shapes.
bool gather_before_pointwise(module& m, instruction_ref ins);

}  // namespace kiln::algebra
