// cpu::packed_gemm: a product A B with constant B (a linear layer's weights) on Kiln's
// own kernels instead of oneDNN's matmul. oneDNN 2.6's gemm:jit on AVX2 packs B again on
// every call; here B is packed once, at compile time, into column panels
// [ceil(N/16)][K][16] (zero-padded), stored as a literal. At run time each thread takes a
// range of panels (or, when the panels are few, of rows) and runs 6 x 16 register tiles
// over it, with A read in place, K in blocks that keep a B micro-panel in L1, and the bias
// and post-ops applied to the registers before the one store. The kernels are chosen at
// load time by cpuid (AVX2+FMA, or the baseline), so a saved program runs on any x86-64.
//
// A is fp32 row-major [..., M, K] (the batch dims folded into M), the result row-major.
// Post-ops: linear, relu, clip_v2, hardswish (MobileNetV3's classifier: 0.206 ms on oneDNN's
// gemm:jit, 0.123 here), gelu_erf (with fast_math: its erf is the generated
// kernels' polynomial, fused_post_kind.hpp), and binary add/sub/mul/max/min with an operand
// that is either one value per column (broadcast over the rows) or a full tensor of the
// result's shape. Anything else stays on oneDNN (lower_packed_gemm returns false). GELU in
// the epilogue saves the MLP's separate pass (bert_small's 4 first MLP products with their
// GELU 0.75-0.81 ms against 0.83 for the product and a generated GELU kernel; vit_tiny's 6
// 1.00-1.10 against 1.12-1.14).
//
// Inputs: (a, packed b, [bias], post-op inputs..., [a's copy], output buffer). When K is
// a multiple of 1024 (A's rows 4 KiB apart), the 12 rows of a register tile fall into the
// same L1 cache set and evict each other and B (128x1024x256 at 318-320 GFLOP/s instead of
// 414-432 with rows 1040 floats apart, Zen 5 EPYC, 2 threads): A is then copied into a
// planned buffer with padded rows (a_copy_stride) before the product;
// KILN_CPU_PACKED_GEMM_COPY_A=0 reads A in place regardless.
// Used for products of 2 rows or more on CPUs with AVX2 and FMA, and of any rows with
// AVX-512 (packed_gemm.cpp has the timings behind the rule).
// KILN_CPU_PACKED_GEMM=0 keeps these products on oneDNN; =all takes every product that
// fits, whatever its size (for tests and measurements).
// KILN_CPU_PACKED_GEMM_ISA=generic runs the baseline kernels even where AVX2 is available.
#pragma once
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/onednn/op_matmul.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct packed_gemm {
    std::int64_t m = 0, n = 0, k = 0;   // all rows of A (batch dims folded), columns, depth
    std::vector<std::int64_t> out_lens; // the result's dims (row-major)
    bool has_bias = false;
    std::vector<post_op> post_ops;      // binary inputs: [n]-vectors or full row-major tensors
    std::int64_t a_copy_stride = 0;     // > 0: A is copied, rows this many floats apart, into
                                        // the input before the output buffer
    // bf16 (a --bf16 program's product on a CPU with AVX512-BF16): B is packed in bf16
    // pairs (pack_gemm_weights_bf16) and each run converts A into bf16 rows a_copy_stride
    // bf16 values apart in the buffer before the output one; the bf16 kernels multiply
    // them (vdpbf16ps, float32 accumulation and epilogue). Loaded on a CPU without them,
    // the panels are widened to float32 once (exactly) and the float32 kernels run.
    bool bf16 = false;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.m, "m");
        f(self.n, "n");
        f(self.k, "k");
        f(self.out_lens, "out_lens");
        f(self.has_bias, "has_bias");
        f(self.post_ops, "post_ops");
        f(self.a_copy_stride, "a_copy_stride");
        f(self.bf16, "bf16");
    }
    std::string name() const { return "cpu::packed_gemm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }

    // The kernels finalize chose: "avx512_bf16", "avx512", "avx2", "generic", or "" before finalize.
    std::string isa() const;

    struct plan;
    std::shared_ptr<const plan> ready;  // built by finalize, not an attribute
};

namespace pgemm {
struct post_step;
struct args;
}  // namespace pgemm

// The epilogue steps of `ops` (kinds Kiln's kernels implement, else a parse error naming
// `op_name`), mapped once at finalize; `full(input)`: that binary operand is laid out as
// the result (else one value per column).
std::vector<pgemm::post_step> packed_post_steps(const std::vector<post_op>& ops, const std::string& op_name,
                                                const std::function<bool(std::size_t)>& full);
// Puts the steps into g, each binary one pointing at its operand among the run's args.
void bind_post_steps(pgemm::args& g, const std::vector<pgemm::post_step>& steps, const std::vector<post_op>& ops,
                     const std::vector<argument>& args);

// B ([k][n] row-major, or [n][k] when trans_b) packed as [ceil(n/16)][k][16], zero-padded.
std::vector<float> pack_gemm_weights(const std::vector<float>& b, std::size_t k, std::size_t n, bool trans_b);

// The same in bf16 pairs: [ceil(n/16)][ceil(k/2)][16][2] bf16 (round to nearest even; k's
// odd tail paired with 0), as a float32 blob of half as many values.
std::vector<float> pack_gemm_weights_bf16(const std::vector<float>& b, std::size_t k, std::size_t n, bool trans_b);

// Replaces `pos` by a packed_gemm computing matmul `mm` (planned by the lowering: bias,
// post-ops) over `operands` (a, the IR weights literal, [bias vector], post-op inputs)
// into `dst`, when the layouts, post-ops and sizes suit it; false, changing nothing,
// otherwise.
// `rules` false: whenever it can (the tuner measures it), not only where the rules choose it.
bool lower_packed_gemm(lower_env& env, const matmul& mm, const std::vector<instruction_ref>& operands,
                       const shape& dst, instruction_ref pos, bool rules = true);

}  // namespace kiln::cpu
