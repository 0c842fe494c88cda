// cpu::attention: softmax(scale * Q K^T + mask) V over every batch index (batch and
// heads), one instruction instead of two oneDNN matmuls, a scale, a mask add and a
// softmax, each a pass over the score tensor.
//
// Each thread (a part, on cpu::team) takes an equal range of the query rows of all batch
// indices (batch and heads). For each batch index it reaches, it packs K^T and V into the
// packed GEMM's 16-column panels (packed_gemm_args.hpp) in its own part of the scratch;
// then it takes the rows up to 24 at a time: their scores (the packed GEMM's register
// tiles, Q read in place) into its own score rows, each row's softmax while it is in L1
// (scale, mask, max, exp, sum), and the rows' P V, written straight into the result with
// its own row stride (with the transpose that usually follows, already in [batch, seq,
// heads * d] order, as oneDNN's matmul does in write_through_transpose), each row then
// divided by its sum. A thread so reads panels and writes scores only in lines it wrote
// itself: shared panels and score rows handed out task by task cost vit_tiny's 6
// attentions 1.28 against 1.05 ms, bert_small's 4 0.53 against 0.35 (2-vCPU Zen 5, where
// lines last written by the other core are slow to reach).
//
// Inputs: (q [..., Sq, D], kt [..., D, Sk], v [..., Sk, Dv], [mask], scratch, output
// buffer). q, kt and v have the same batch dims and any strides with unit stride along
// D (q and kt) and Dv (v); the mask broadcasts to [..., Sq, Sk], with unit stride along
// Sk. The output buffer's shape is the result's (any strides, unit stride along Dv).
// The exp is vec_exp.hpp's polynomial with fast_math, std::exp without it. Lowered on
// CPUs with AVX2 and FMA; a saved program runs the baseline kernels elsewhere. With
// AVX-512 the softmax rows run sixteen lanes (the tail under a mask) and K is packed by
// 16 x 16 register transposes (vit_tiny's 6 attentions 0.736 vs 0.774 ms, bert_small's 4
// 0.316 vs 0.338, Zen 5 EPYC, 2 threads, medians of 5 alternating runs).
// KILN_CPU_ATTENTION=0 keeps attention on oneDNN.
//
// With `generic` (a generic program's attention, sizes known only when it runs) the inputs
// are (q, kt, v, [mask]) alone: each call checks the sizes, copies an operand whose strides
// do not fit, takes the scratch from a buffer its thread keeps, and allocates the result
// (row-major [..., Sq, Dv]). Before, a generic program ran QK^T and PV as batched sgemm
// calls and the softmax as a generated kernel: bert_small at 77 tokens spent ~1.7 ms there
// against the static program's 0.27 ms on this kernel.
//
// With `bf16` (a --bf16 program's attention, on a CPU with the packed GEMM's bf16 kernels)
// both products run on those kernels: K and V packed as above and then turned into bf16
// pairs in place, each task's Q rows and probability rows converted to bf16 (round to
// nearest even) before their product; scores, softmax and accumulation stay float32. That
// is the program's own rounding (its ref target rounds Q, K, V and the probabilities to
// bf16 too). Loaded where those kernels are missing, the float32 path runs.
#pragma once
#include "targets/cpu/lowering_util.hpp"
#include "targets/cpu/kernels/packed_gemm/packed_gemm_args.hpp"
#include "passes/attention_match.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::cpu {

struct attention {
    float scale = 1.0f;      // multiplies Q K^T before the mask is added
    bool has_mask = false;
    bool exact_exp = false;  // std::exp (fast_math off) instead of the polynomial
    bool bf16 = false;       // products in bf16 where the CPU has the bf16 kernels (above)
    bool generic = false;    // sizes at run time, no scratch or output inputs (above)
    // The mask as a bool condition choosing between the scaled score and `fill`
    // (where(mask, scores, fill), GPT-2's causal mask; where(mask, fill, scores) with
    // `fill_first`) instead of a float32 mask added to it.
    bool select = false;
    bool fill_first = false;
    float fill = 0.0f;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.scale, "scale");
        f(self.has_mask, "has_mask");
        f(self.exact_exp, "exact_exp");
        f(self.bf16, "bf16");
        f(self.generic, "generic");
        f(self.select, "select");
        f(self.fill_first, "fill_first");
        f(self.fill, "fill");
    }
    std::string name() const { return "cpu::attention"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return generic ? -1 : static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }

    pgemm::part_fn part = nullptr;  // the products' kernels, chosen by finalize (not an attribute)
    pgemm::part_fn bf16_part = nullptr;  // with bf16, where this CPU has them (finalize)

private:
    void run(const argument& q, const argument& kt, const argument& v, const argument* mask, float* scratch,
             std::size_t scratch_bytes, const argument& out) const;
};

// Replaces each softmax(scale * matmul(q, kt) [+ mask | where(mask, ., fill)]) whose only
// reader is a matmul with v (every intermediate read once; the scale a scalar constant,
// multiplied or divided; the fill a scalar constant) by one cpu::attention; a generic program's (generic_attentions) by its
// generic form. Runs before the rest of the cpu lowering.
void fuse_attention(lower_env& env);

// A generic program's attentions that fuse_attention will take: float32, a float32 mask
// added or a bool one selecting, on a CPU with the kernel. The passes before it leave them as they are
// (codegen::spell_out_softmax keeps the softmax, the fusion pass the scale and the mask).
std::vector<attention_match::match> generic_attentions(module& m, const cpu_options& options);

}  // namespace kiln::cpu
