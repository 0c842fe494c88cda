// The quantized ops of QDQ models on oneDNN's int8 kernels (src/ops/quant_fused.hpp):
//
// cpu::quant_conv, cpu::quant_matmul: operands (x, w[, bias]); x uint8/int8 in its IR
//   strides (channels-last for convolutions), w the int8 IR weights literal, reordered
//   once in finalize into the layout the primitive wants (kernel-owned memory, so it
//   follows the CPU the program is loaded on), bias float32 in accumulator units
//   (bias / (x_scale * w_scale), made by the lowering). The requantize is oneDNN's:
//   per-channel output scales x_scale * w_scale / y_scale, the zero points (run-time
//   values bound once), the folded Relu/Clip as a clip post-op before the output zero
//   point, saturation to the 8-bit result. A float32 result is the dequantized product,
//   clamped in the kernel where a Relu or Clip was its only reader (quant_conv::float_clamp).
// cpu::quant_reorder: QuantizeLinear / DequantizeLinear with one scale and zero point,
//   and plain layout changes of 8-bit tensors, as a oneDNN reorder (x * scale + zero
//   point, round half to even, saturate). Q multiplies by 1 / y_scale where ONNX
//   divides: a level can differ where x / y_scale falls within an ulp of a half.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_op.hpp"
#include "targets/cpu/lowering_util.hpp"

#include "ops/quant_fused.hpp"
#include "targets/cpu/kernels/quant_loops/quant_loops.hpp"

namespace kiln::cpu {

struct quant_conv : dnnl_op<quant_conv> {
    static constexpr bool work_per_element = false;
    op::quant_convolution op;  // has_bias: the bias operand is float32 in accumulator units
    // A float result clamped to [lo, hi] (eltwise clip post-op): the Relu or Clip that was the
    // result's only reader (lower_quant_convolution).
    std::vector<float> float_clamp;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
        f(self.float_clamp, "float_clamp");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::quant_conv")
};

struct quant_matmul : dnnl_op<quant_matmul> {
    static constexpr bool work_per_element = false;
    op::quant_dot op;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::quant_matmul")
    // Without VNNI (quant_real.hpp): the operands converted to real values.
    void bind_real_operands(primitive_kernel& k, const dnnl::primitive_desc_base& pd,
                            const std::vector<shape>& operands, const std::vector<argument>& constants,
                            const dnnl::engine& eng, std::size_t r) const;
};

struct quant_reorder : dnnl_op<quant_reorder> {
    float scale = 1.0f;             // output = (x - src_zero_point) * scale + dst_zero_point
    std::int64_t src_zero_point = 0;
    std::int64_t dst_zero_point = 0;
    type out_type = type::float32;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.scale, "scale");
        f(self.src_zero_point, "src_zero_point");
        f(self.dst_zero_point, "dst_zero_point");
        f(self.out_type, "out_type");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::quant_reorder")
};

#undef KILN_CPU_QUANT_OP_DECLS

// Whether oneDNN (as limited by ONEDNN_MAX_CPU_ISA) has a VNNI dot product for int8. Without
// it (AVX2, AVX-512 without VNNI) its int8 kernels sum pairs of u8 x s8 products in int16
// with saturation (vpmaddubsw): full-range int8 weights (QDQ models' -127..127) overflow,
// results off by several levels. The integer convolution and matmul then go back to float
// ops before lowering (dequantize_without_vnni.hpp); cpu::quant_conv / quant_matmul met
// there (a program compiled on a VNNI CPU, or KILN_CPU_INT8_KERNELS=all) compute in float
// inside (quant_real.hpp).
bool has_int8_dot_product();

// The lowerings (selection.cpp's candidates): false leaves the instruction as it is.
bool lower_quant_convolution(lower_env& env, instruction_ref ins);
bool lower_quant_dot(lower_env& env, instruction_ref ins);
bool lower_quantize_linear(lower_env& env, instruction_ref ins);
bool lower_dequantize_linear(lower_env& env, instruction_ref ins);
bool lower_quant_add(lower_env& env, instruction_ref ins);

}  // namespace kiln::cpu
