// The other oneDNN-backed ops of the cpu target. Each takes its operands in any
// strided layout (the IR shape is the oneDNN descriptor) and writes the output buffer
// (last input) in the layout the lowering chose for it, usually its input's.
#pragma once
#include "targets/cpu/kernels/onednn/dnnl_op.hpp"
#include "targets/cpu/kernels/onednn/post_ops.hpp"

#include <kiln/operation.hpp>

#include <optional>

namespace kiln::cpu {

// IR pooling (max or average, global or windowed) of x.
struct pooling : dnnl_op<pooling> {
    operation op;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op, "op");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::pooling")
};

// softmax / log_softmax of x over `axis`.
struct softmax : dnnl_op<softmax> {
    std::int64_t axis = -1;
    bool log = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.log, "log");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::softmax")
};

// layer_norm of x (rows: dims before `axis`; normalized: dims from `axis` on, seen as
// one) with operands (x, scale[, bias]); scale and bias hold one value per normalized
// element.
struct layer_norm : dnnl_op<layer_norm> {
    std::int64_t axis = -1;
    float epsilon = 1e-5f;
    bool has_bias = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.epsilon, "epsilon");
        f(self.has_bias, "has_bias");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::layer_norm")
};

// Inference batch normalization: operands (x, scale, bias, mean, var), per channel (dim 1).
struct batch_norm : dnnl_op<batch_norm> {
    float epsilon = 1e-5f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.epsilon, "epsilon");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::batch_norm")
};

// Local response normalization across channels (ONNX LRN, odd sizes).
struct lrn : dnnl_op<lrn> {
    float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
    std::int64_t size = 1;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
        f(self.beta, "beta");
        f(self.bias, "bias");
        f(self.size, "size");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::lrn")
};

// A reduction of x over `axes` (algorithm: sum, mean, max, min, mul, norm_lp_sum,
// norm_lp_power_p_sum with power p); the output buffer may drop the reduced dims.
struct reduction : dnnl_op<reduction> {
    std::string algorithm = "sum";
    std::vector<std::int64_t> axes;
    float p = 0.0f;
    std::vector<std::size_t> out_lens;  // the IR result's lens (keepdims or not)
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.algorithm, "algorithm");
        f(self.axes, "axes");
        f(self.p, "p");
        f(self.out_lens, "out_lens");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::reduction")
};

// Concatenation of the operands along `axis`.
struct concat : dnnl_op<concat> {
    std::int64_t axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::concat")
};

// Resampling of the spatial dims (2..) of x to the output buffer's dims: "nearest" or
// "linear" (half-pixel centres), the cases where oneDNN equals ONNX Resize exactly.
struct resampling : dnnl_op<resampling> {
    std::string algorithm = "nearest";
    std::vector<std::size_t> out_lens;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.algorithm, "algorithm");
        f(self.out_lens, "out_lens");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::resampling")
};

// Elementwise: ops[0] is the primitive, the rest its post-ops (e.g. hard_sigmoid is
// linear then clip).
struct eltwise : dnnl_op<eltwise> {
    std::vector<post_op> ops;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.ops, "ops");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    // The rank oneDNN sees: 1-D tensors go as [1, n] (see make_pd).
    std::size_t post_op_rank(const std::vector<shape>& operands) const;
    KILN_CPU_DNNL_OP_DECLS("cpu::eltwise")
};

// Binary elementwise with NumPy broadcasting of b into a's shape (a has the output's
// lens), then post-ops.
struct binary : dnnl_op<binary> {
    std::string algorithm = "add";
    std::vector<post_op> post_ops;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.algorithm, "algorithm");
        f(self.post_ops, "post_ops");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::binary")
};

// Copies x into the output buffer's layout (e.g. to channels-last before a convolution).
// With `view`, what is copied is that strided window of x's memory, `offset` elements
// in (a gather at a constant index, a slice); with `out_lens`, the output buffer is
// row-major with these lens (a reshape of a non-row-major tensor).
struct reorder : dnnl_op<reorder> {
    std::optional<shape> view;
    std::size_t offset = 0;
    std::vector<std::size_t> out_lens;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.view, "view");
        f(self.offset, "offset");
        f(self.out_lens, "out_lens");
        f(self.scratchpad, "scratchpad");
        f(self.layouts, "layouts");
        f(self.dst_layout, "dst_layout");
    }
    KILN_CPU_DNNL_OP_DECLS("cpu::reorder")
};

#undef KILN_CPU_DNNL_OP_DECLS

}  // namespace kiln::cpu
