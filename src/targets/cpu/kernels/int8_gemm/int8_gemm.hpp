// cpu::int8_gemm: quant_convolution (1x1, stride 1, no padding, group 1: channels-last
// activations are a GEMM of pixels x Cin times Cin x Cout; group 1 with at most 64 inputs
// per window: the same GEMM over int8_im2col's rows of windows) and quant_dot with constant
// int8 weights on Kiln's own exact int8 kernels, for CPUs whose oneDNN has no VNNI int8 dot
// product (there oneDNN's int8 kernels saturate: op_quant.hpp). Exact: the same int32
// accumulators and requantize as the ref target (ops/quant_fused.hpp), bit for bit.
//
// The weights are widened once, at compile time, into int16 panels of 16 columns
// (int8_gemm_args.hpp), with per output channel: the activation zero point's compensation
// -x_zero_point * sum_k w[k][c] (and the int32 bias), the scale x_scale * w_scale[c] and the
// bias terms of the double path. The AVX2 kernel multiplies by vpmaddwd (no saturation);
// the portable one gives the same bits on any x86-64. Chosen by cpuid when the program is
// loaded (finalize), so a saved program runs anywhere; KILN_CPU_PACKED_GEMM_ISA=generic
// caps the choice as for the float kernels.
//
// On CPUs with AVX-512 VNNI the rule int8_gemm_vnni_takes (where measured faster than
// oneDNN's int8 kernels) packs the weights instead as bytes, 4 k's per 32-bit lane
// (int8_gemm_args.hpp's b8, `quads`), for vpdpbusd (int8_gemm_vnni.cpp); loaded on a CPU
// without VNNI, finalize falls back to the AVX2 / portable kernel, whose first run widens
// the weights into int16 panels (and undoes the s8 shift in comp), kept for later runs.
//
// Inputs: (a [m][k] u8/s8 (a channels-last activation or row-major rows), packed b int16,
// comp int32, scale float32, dparams float64 [3][padded n] (double scale, int bias, float
// bias), output buffer [m][n] (channels-last for a convolution)).
#pragma once
#include "targets/cpu/cpu_options.hpp"
#include "targets/cpu/kernels/int8_gemm/int8_gemm_args.hpp"
#include "targets/cpu/lowering_util.hpp"

#include "ops/quant_fused.hpp"

#include <kiln/operation.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cpu {

struct int8_widened;

struct int8_gemm {
    std::int64_t m = 0, n = 0, k = 0;
    type a_type = type::uint8;
    type out_type = type::float32;
    float y_scale = 1.0f;
    std::int64_t y_zero_point = 0, y_min = 0, y_max = 0;
    bool f32_exact = false;
    bool quads = false;  // b is b8, VNNI's layout (comp shifted for s8 a)
    std::vector<std::int64_t> out_lens;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.m, "m");
        f(self.n, "n");
        f(self.k, "k");
        f(self.a_type, "a_type");
        f(self.out_type, "out_type");
        f(self.y_scale, "y_scale");
        f(self.y_zero_point, "y_zero_point");
        f(self.y_min, "y_min");
        f(self.y_max, "y_max");
        f(self.f32_exact, "f32_exact");
        f(self.out_lens, "out_lens");
        f(self.quads, "quads");
    }
    std::string name() const { return "cpu::int8_gemm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    void finalize(context& ctx, const shape& out, const std::vector<shape>& inputs);
    argument compute(context& ctx, const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& inputs) const {
        return static_cast<std::ptrdiff_t>(inputs.size()) - 1;
    }
    std::string isa() const;  // "avx512_vnni", "avx2", "generic", or "" before finalize

    i8g::gemm_fn kernel = nullptr;  // chosen in finalize
    std::shared_ptr<int8_widened> widened;  // quads without VNNI: int16 copies (int8_gemm.cpp)
};

// The per-channel requantize constants of p for `channels` output channels, padded to
// i8g::padded(channels): `abs_sum[c]` is sum |w| of the channel, `col_sum[c]` sum w (for the
// zero point's compensation; all 0 when the kernel subtracts it itself), `bias` the bias
// literal's values (empty without one) and whether it is int32.
struct int8_requant_pack {
    std::vector<std::int32_t> comp;
    std::vector<float> scale;     // [2][padded]: the scale, and the scale times 1 / y_scale
    std::vector<double> dparams;  // [3][padded]: double scale, int bias, float bias
    bool f32_exact = false;
};
int8_requant_pack pack_int8_requant(const op::requantize_params& p, std::size_t channels,
                                    const std::vector<std::int64_t>& abs_sum, const std::vector<std::int64_t>& col_sum,
                                    const std::vector<double>& bias, bool int_bias);
// The requant view of packed constants for a kernel run.
i8g::requant int8_requant_view(const std::int32_t* comp, const float* scale, const double* dparams,
                               std::size_t channels, bool f32_exact, type out_type, float y_scale,
                               std::int64_t y_zero_point, std::int64_t y_min, std::int64_t y_max);

// The end both lowerings share: the packed int16 weights and rq's constants as literals,
// a buffer of shape `out` and `op` (inputs x, weights, comp, scale, dparams, buffer) in
// place of ins. A channels-last `out` that is a program result gets a cpu::quant_reorder
// copy to row-major after the kernel, since a program's results are row-major.
void emit_int8_kernel(lower_env& env, instruction_ref ins, const operation& op, instruction_ref x,
                      const std::vector<std::int16_t>& weights, const int8_requant_pack& rq, const shape& out);
void emit_int8_kernel(lower_env& env, instruction_ref ins, const operation& op, instruction_ref x,
                      const literal& weights, const int8_requant_pack& rq, const shape& out);

// w[k][n] (element (kk, c) at w[kk * sk + c * sn]) as the kernels' int16 panels.
std::vector<std::int16_t> pack_int8_panels(const std::int8_t* w, std::size_t k, std::size_t n, std::size_t sk,
                                           std::size_t sn);

// w as VNNI's byte panels (b8), and b8 back as int16 panels.
std::vector<std::int8_t> pack_int8_quads(const std::int8_t* w, std::size_t k, std::size_t n, std::size_t sk,
                                         std::size_t sn);
std::vector<std::int16_t> widen_int8_quads(const std::int8_t* b8, std::size_t k, std::size_t n);

// The kernels for this CPU (cpuid; `cap` lowers the choice).
i8g::gemm_fn int8_gemm_kernel(isa_cap cap);
i8g::dw_fn int8_depthwise_kernel(isa_cap cap);
// All of C on the current OpenMP team: threads split the rows, or the panels when the rows
// are few.
void run_int8_gemm(const i8g::gemm_args& g, i8g::gemm_fn kernel);

// Whether the own int8 kernels replace oneDNN's here: no VNNI int8 dot product, and neither
// KILN_CPU_INT8_KERNELS=all (oneDNN's kernels, float inside) nor =float (the float ops of
// dequantize_without_vnni, as before these kernels) asked otherwise (cpu_options::int8_kernels).
bool own_int8_kernels(const cpu_options& o);
// The rules (selection.cpp's conditions; dequantize_without_vnni leaves what they take).
bool int8_gemm_takes(module& m, instruction_ref ins, const cpu_options& o);
// With AVX-512 VNNI (has_avx512_vnni, not capped by KILN_CPU_PACKED_GEMM_ISA): the products
// int8_gemm_takes would take without VNNI, where the VNNI GEMM measured faster than oneDNN's
// int8 kernels (int8_gemm.cpp), or all of them with KILN_CPU_INT8_KERNELS=own.
bool int8_gemm_vnni_takes(module& m, instruction_ref ins, const cpu_options& o);
// What the VNNI GEMM can take on this CPU, faster or not (exhaustive_tune measures it).
bool int8_gemm_vnni_fits(instruction_ref ins, const cpu_options& o);
// x (an 8-bit or float32 activation) with the IR strides of `want`: x (its row-major copy
// when it is in a oneDNN layout), or a copy by cpu::quant_reorder before pos.
instruction_ref int8_relayout(lower_env& env, instruction_ref pos, instruction_ref x, const shape& want);
// The lowering: false, changing nothing, where int8_gemm_takes is false.
bool lower_int8_gemm(lower_env& env, instruction_ref ins);
bool lower_int8_gemm_vnni(lower_env& env, instruction_ref ins);
// The VNNI GEMM wherever int8_gemm_vnni_fits, its rule aside (a tuned choice, tuning_int8.hpp).
bool lower_int8_gemm_vnni_anywhere(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
