// Matrix products: matmul (NumPy matmul: batched, broadcast batch dims, 1-D operands),
// gemm (ONNX Gemm: transposes, alpha, beta and a broadcast C), and the integer forms
// matmul_integer (ONNX MatMulInteger) and qlinear_matmul (ONNX QLinearMatMul).
//
// Gemm stays one op rather than transpose + matmul + scale + add: alpha * (A B) + beta * C
// computed in one step rounds once where the decomposition rounds up to three times, the
// integer forms of Gemm take float alpha/beta, and a CPU or GPU library call takes the
// transposes, alpha and the beta * C term as parameters of a single matmul primitive. A
// later pass can still rewrite gemm{alpha=1, beta=1} into matmul + add where that helps.
#pragma once
#include "ops/nn_common.hpp"

#include <kiln/operation.hpp>

namespace kiln::op {

struct matmul {
    std::string name() const { return "matmul"; }
    // Inner dims that are both dynamic cannot be checked by sampling them independently.
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (a, b[, c]): alpha * op(a) op(b) + beta * c, op = transpose when trans_*.
struct gemm {
    float alpha = 1.0f;
    float beta = 1.0f;
    bool trans_a = false;
    bool trans_b = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
        f(self.beta, "beta");
        f(self.trans_a, "trans_a");
        f(self.trans_b, "trans_b");
    }
    std::string name() const { return "gemm"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (a, b[, a_zero_point][, b_zero_point]), 8-bit; int32 result of
// (a - a_zero_point) (b - b_zero_point) with matmul's shape rules. A zero point is one
// value, one per row of a (per column of b), or broadcastable to its operand.
struct matmul_integer {
    bool has_a_zero_point = false;
    bool has_b_zero_point = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.has_a_zero_point, "has_a_zero_point");
        f(self.has_b_zero_point, "has_b_zero_point");
    }
    std::string name() const { return "matmul_integer"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs (a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point):
// the product of the dequantized operands, quantized with y_scale and y_zero_point
// (round half to even, saturate) into y_zero_point's type.
struct qlinear_matmul {
    std::string name() const { return "qlinear_matmul"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Output lens of NumPy matmul for operand lens a and b (shape error naming op_name).
std::vector<std::size_t> matmul_lens(const std::string& op_name, const std::vector<std::size_t>& a,
                                     const std::vector<std::size_t>& b);
// The same for possibly dynamic dims: batch dims broadcast, inner dims checked when fixed.
std::vector<dynamic_dimension> matmul_dyn_dims(const std::string& op_name, const std::vector<dynamic_dimension>& a,
                                               const std::vector<dynamic_dimension>& b);

}  // namespace kiln::op
