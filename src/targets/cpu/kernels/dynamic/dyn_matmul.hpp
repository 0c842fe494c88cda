// cpu::dyn_matmul: a float32 matmul whose sizes are known only when it runs (an
// instruction of a generic program: the sequence or past length of a range).
//
// Why: the cpu target's matmul kernels (oneDNN primitives, the packed GEMM) are planned for
// one shape at compile time, and the reference matmul is a naive loop. oneDNN's sgemm
// takes M, N, K, the leading dimensions and the transposes per call with no primitive to
// create, so a dynamic matmul runs at a BLAS's speed without compiling anything per shape.
// Batched and broadcast operands (NumPy matmul) run one sgemm per matrix; a matrix whose
// rows or columns are contiguous is read in place (a transposed view becomes sgemm's
// transpose flag), others are copied to row-major first. Operands of rank < 2 keep the
// reference matmul.
#pragma once
#include "targets/cpu/fusion.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct dyn_matmul {
    // > 0: b is a constant [k][n] matrix packed into cpu::packed_gemm's column panels
    // (pack_gemm_weights), and the product runs on packed_gemm's kernels with A's rows
    // counted at run time: the kernels a static program's product runs, with B packed
    // once (sgemm reads B unpacked on every call), and the same panels as a static
    // program of the model, so they are stored once (lower_env::constant).
    std::int64_t packed_n = 0, packed_k = 0;
    // Packed only: the elementwise work after the product in the kernels' epilogue, as a
    // static program's cpu::packed_gemm takes it (fusion.hpp's find_post_ops over the
    // generic program's dims): a constant bias (input 2, has_bias), then `post_ops` (a
    // GELU, a residual add...), each binary one reading its input `post_op::input`, laid
    // out as the result or one value per column.
    bool has_bias = false;
    std::vector<post_op> post_ops;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.packed_n, "packed_n");
        f(self.packed_k, "packed_k");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
    }
    std::string name() const { return "cpu::dyn_matmul"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    // oneDNN generates its sgemm kernels on the first call in a process (~40 ms on an AVX-512
    // EPYC): done here, at compile time, instead of in a program's first run.
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);

    // The packed kernels finalize chose for this CPU (not an attribute).
    pgemm::part_fn part = nullptr;
    // post_ops as the epilogue applies them, per binary operand laid out as the result
    // (full) or as one value per column (finalize; not attributes).
    std::vector<pgemm::post_step> steps_full, steps_column;

private:
    argument compute_packed(const shape& out, const std::vector<argument>& args) const;
    // Binds post_ops' operands for this call into g; returns them (copies included) to be
    // kept until the product is done.
    std::vector<argument> bind_epilogue(pgemm::args& g, const shape& result, const std::vector<argument>& args) const;
};

// Replaces a float32 matmul with a dynamic result by a cpu::dyn_matmul (packed with its
// epilogue where dyn_matmul_packs); false, changing nothing, when it does not apply.
bool lower_dyn_matmul(lower_env& env, instruction_ref ins);
// Whether lower_dyn_matmul puts this matmul on the packed kernels (constant 2-D weights),
// and so takes the elementwise work after it (codegen::post_op_chains keeps it out of fusion).
bool dyn_matmul_packs(const cpu_options& options, instruction_ref ins);
// The elementwise work after such a product that its epilogue takes (none with fusion
// off): find_post_ops' chain (fusion.hpp), cut before the first step whose operand is
// computed after the product (the fused instruction takes the product's place).
fused_chain dyn_matmul_epilogue(const cpu_options& options, instruction_ref ins);
// The same for a dynamic float32 Gemm with alpha 1 (a classifier's last layer with a
// dynamic batch): a cpu::dyn_matmul over its operands (transposed ones as views), plus
// the bias C when beta is 1.
bool lower_dyn_gemm(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
