// Post-ops: elementwise work fused into the oneDNN primitive that produces its input
// (convolution, matmul, ...), applied in order to the result before it is stored.
// They are kept by name, not by oneDNN enum value, so that saved programs do not
// depend on the library's numbering.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_util.hpp"
#include "targets/cpu/kernels/fused_post_kind.hpp"

#include <kiln/instruction.hpp>
#include <kiln/shape.hpp>

#include <dnnl.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cpu {

class primitive_kernel;

struct post_op {
    // "eltwise": algorithm is a oneDNN eltwise name (relu, gelu_erf, clip_v2, linear...).
    // "binary": algorithm is add/sub/mul/div/max/min, with the op's input `input` as src1.
    // "sum": adds the values already in the destination buffer (sum_post_op.hpp).
    std::string kind = "eltwise";
    std::string algorithm;
    float alpha = 0.0f;
    float beta = 0.0f;
    std::int64_t input = -1;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.kind, "kind");
        f(self.algorithm, "algorithm");
        f(self.alpha, "alpha");
        f(self.beta, "beta");
        f(self.input, "input");
    }
    friend bool operator==(const post_op&, const post_op&) = default;
};

// Whether the chain adds into the values already in the destination (a "sum" post-op).
bool has_sum_post_op(const std::vector<post_op>& ops);

// dnnl algorithms by name (throws a kiln parse error for unknown names, e.g. from a
// corrupted file).
dnnl::algorithm eltwise_algorithm(const std::string& name);
dnnl::algorithm binary_algorithm(const std::string& name);

// The oneDNN post-op chain. Binary src1 descriptors come from the op's input shapes,
// seen with the rank of the destination.
// `layouts[i]`, when given and not empty, is input i's oneDNN layout (blocked activations).
dnnl::post_ops make_post_ops(const std::vector<post_op>& ops, const std::vector<shape>& inputs,
                             std::size_t dst_rank, const std::vector<md_record>& layouts = {});
// oneDNN argument id of binary post-op number `index` (its position in the chain).
int binary_post_op_arg(std::size_t index);
// Binds the src1 operands of the binary post-ops.
void bind_post_op_inputs(primitive_kernel& k, const std::vector<post_op>& ops, const std::vector<shape>& operands,
                         std::size_t dst_rank, const std::vector<md_record>& layouts = {});
// A primitive_attr with the post-ops and the user-managed scratchpad.
dnnl::primitive_attr make_attr(const std::vector<post_op>& ops, const std::vector<shape>& operands,
                               std::size_t dst_rank, const std::vector<md_record>& layouts = {});

// The eltwise post-ops equal to a unary pointwise instruction (relu, clip with constant
// bounds, gelu, sigmoid, ...), or nothing when it has no exact oneDNN form. A dynamic
// instruction only `dynamic_ok` (cpu::dyn_conv takes its sizes at run time).
std::optional<std::vector<post_op>> eltwise_post_ops(instruction_ref ins, bool dynamic_ok = false);
// The kind Kiln's own kernels apply for post-op `p`, or nothing when they do not implement it.
// GELU (gelu_erf, its erf a polynomial within fast_math's error) only where `with_gelu`:
// the packed GEMM's epilogue has it, the Winograd one does not; hardswish only where
// `with_hardswish` (the packed GEMM: MobileNetV3's classifier).
std::optional<fused_post_kind> fused_post_kind_of(const post_op& p, bool with_gelu = false,
                                                  bool with_hardswish = false);
// A scalar constant input (a literal with one element, any rank), as float.
std::optional<float> scalar_constant(instruction_ref ins);

}  // namespace kiln::cpu
