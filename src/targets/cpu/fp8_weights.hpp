// fp8 weights on the cpu target (quantize_fp8's, or a model's own float8 initializers): a
// DequantizeLinear of a float8 constant with constant scales becomes its float32 value, once,
// at compile time, so the products see constant float32 weights (oneDNN's reordered ones,
// the packed GEMM) with exactly the fp8 values. propagate_constants leaves it (the result is
// 4x its input). The activations' Q/DQ pairs are lowered to fp8_round_trip
// (kernels/fp8/fp8_round_trip.hpp).
#pragma once
#include <kiln/module.hpp>

#include <string>

namespace kiln::cpu {

struct fold_fp8_weights {
    std::string name() const { return "cpu::fold_fp8_weights"; }
    void apply(module& m) const;
};

}  // namespace kiln::cpu
