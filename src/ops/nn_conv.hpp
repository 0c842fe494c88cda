// Convolution and transposed convolution (ONNX Conv, ConvTranspose).
//
// Inputs are (x, w[, b]) with x = (N, C, spatial...) and w = (M, C/group, kernel...) for
// convolution, w = (C, M/group, kernel...) for deconvolution. Attribute vectors hold one
// value per spatial dim; empty means the default (stride 1, dilation 1, no padding).
// `padding` is {begin..., end...} like ONNX pads. padding_mode same_* keeps ONNX auto_pad
// for inputs whose spatial size is unknown at parse time; it is resolved from the
// input's size in compute_shape and compute.
#pragma once
#include "ops/nn_common.hpp"
#include "ops/nn_conv_kernel.hpp"

#include <kiln/operation.hpp>

namespace kiln::op {

struct conv_attributes {
    std::vector<std::int64_t> padding;
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> dilation;
    std::int64_t group = 1;
    pad_mode padding_mode = pad_mode::explicit_pads;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.padding, "padding");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.group, "group");
        f(self.padding_mode, "padding_mode");
    }

    // Validates x = (N, C, spatial...) against w = (M, C/group, kernel...) and the
    // attributes; returns the full geometry (output dims included).
    conv_geometry conv_geom(const std::string& op_name, const shape& x, const shape& w) const;
};

struct convolution : conv_attributes {
    std::string name() const { return "convolution"; }
    op_traits traits() const { return {.batch_separable = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct deconvolution {
    std::vector<std::int64_t> padding;  // may be negative: extends the output
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> dilation;
    std::int64_t group = 1;
    std::vector<std::int64_t> output_padding;  // extra output at the end of each dim
    std::vector<std::int64_t> output_size;     // ONNX output_shape (spatial); overrides padding
    pad_mode padding_mode = pad_mode::explicit_pads;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.padding, "padding");
        f(self.stride, "stride");
        f(self.dilation, "dilation");
        f(self.group, "group");
        f(self.output_padding, "output_padding");
        f(self.output_size, "output_size");
        f(self.padding_mode, "padding_mode");
    }
    std::string name() const { return "deconvolution"; }
    conv_geometry deconv_geom(const shape& x, const shape& w) const;
    // The explicit pads {begin..., end...} this op amounts to for input dims `in` and
    // kernel dims `kernel` (resolves output_size and padding_mode).
    std::vector<std::int64_t> resolved_padding(const std::vector<std::int64_t>& in,
                                               const std::vector<std::int64_t>& kernel) const;
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Checks the optional bias (M) of a convolution-like op.
void check_conv_bias(const std::string& op_name, const shape& b, std::int64_t out_channels);

}  // namespace kiln::op
