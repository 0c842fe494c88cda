// Which two-operand Einsum equations are batched matrix products, and how to run them as
// transpose + matmul: op::einsum only has a reference kernel, while matmul runs on every
// target's GEMM (MaxViT's attention Einsums, 1.69 s of 1.9 s on ref, were the case in point).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::onnx_frontend {

// The product an equation such as "bhqd,bhkd->bhqk" is. Labels in both inputs and the
// output are batch labels, labels in both inputs only are contracted (k), labels in one
// input and the output are free (m from A, n from B). transpose(A, perm_a) has the dims
// [batch..., m..., k...] and transpose(B, perm_b) [batch..., k..., n...]; grouped into
// [batch..., M, K] x [batch..., K, N], their matmul ungrouped to [batch..., m..., n...] and
// transposed by perm_out is the output. Batch labels follow the output's order, m and k
// A's, n B's, so inputs already in matmul form need no transpose.
struct einsum_product {
    std::vector<std::int64_t> perm_a, perm_b, perm_out;
    std::size_t batch = 0, m = 0, k = 0, n = 0;  // how many labels of each kind
    // Whether the m, k or n labels are not exactly one dim each, so a reshape must group them.
    bool needs_grouping() const { return m != 1 || k != 1 || n != 1; }
};

// The product for `equation` (spaces allowed; implicit output as ONNX defines it), or
// nullopt when it is not one: not two inputs, an ellipsis, a label repeated within a term
// (a diagonal), a label only one input has and the output lacks (a sum), no contracted
// label, or an invalid equation (left to op::einsum to report).
std::optional<einsum_product> einsum_as_product(const std::string& equation);

}  // namespace kiln::onnx_frontend
