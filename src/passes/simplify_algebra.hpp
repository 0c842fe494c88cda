// Algebraic simplification, applied until nothing changes:
//   * BatchNormalization (inference) after a Conv, ConvTranspose, Gemm or 2-D MatMul with
//     constant weights folds into new weights and bias (computed in double);
//   * a per-output-channel (or scalar) constant multiply, add or subtract after a Conv,
//     ConvTranspose or Gemm folds into its weights and bias; a 2-D MatMul plus a constant
//     becomes a Gemm with that bias;
//   * chains of constants reassociate: (x*a)*b -> x*(a*b), (x+a)+b -> x+(a+b), (x-a)+b, ...;
//   * division by a constant becomes multiplication by its reciprocal (see fast_math);
//   * identities vanish: x*1, x+0, x-0, x/1, and reshape / flatten / squeeze / unsqueeze /
//     transpose / broadcast (Expand) / convert (Cast) / identity whose result has exactly
//     the input's shape.
// Like ONNX Runtime's fusions, a rewrite that absorbs an instruction into its user only
// happens when that user is its single consumer and it is not a module result, and only
// with constant (literal) operands. Absorbed instructions are left for dead-code
// elimination.
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln {

struct simplify_algebra {
    // On (the compile default, compile_options::fast_math): rewrites that can change the
    // last bit of a result are allowed: x/c -> x*(1/c) for float32/float64 constants that
    // are not powers of two (1/c is rounded, so x*(1/c) may differ from x/c by one ulp),
    // x+(+0) -> x (which turns -0 into +0 when not removed), and matmul(x*c, w) ->
    // matmul(x, w)*c for a scalar c that is not a power of two. Off: only bit-exact
    // identities and reciprocals (powers of two), plus the weight folds, which always run
    // (they round differently but are what every inference compiler does to these graphs).
    bool fast_math = true;
    std::string name() const { return "simplify_algebra"; }
    void apply(module& m) const;
};

}  // namespace kiln
