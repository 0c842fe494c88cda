// Pooling (ONNX MaxPool, AveragePool, LpPool and their Global* forms) and MaxUnpool.
//
// One `pooling` op covers every mode so that targets match a single op: attribute
// vectors hold one value per spatial dim (empty stride/dilation mean 1, empty padding
// means none); `global` pools over the whole spatial extent (used when that extent is
// unknown at parse time; otherwise the parser writes it into `lengths`).
#pragma once
#include "ops/nn_common.hpp"

#include <kiln/operation.hpp>

namespace kiln::op {

enum class pooling_mode : std::uint8_t { average = 0, max = 1, lp = 2 };

struct pooling {
    pooling_mode mode = pooling_mode::max;
    std::vector<std::int64_t> lengths;   // kernel size per spatial dim
    std::vector<std::int64_t> stride;
    std::vector<std::int64_t> padding;   // {begin..., end...}
    std::vector<std::int64_t> dilation;
    bool ceil_mode = false;
    bool count_include_pad = false;  // average: divide by the window size including padding
    std::int64_t p = 2;              // lp: the norm's order
    bool global = false;
    pad_mode padding_mode = pad_mode::explicit_pads;

    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.mode, "mode");
        f(self.lengths, "lengths");
        f(self.stride, "stride");
        f(self.padding, "padding");
        f(self.dilation, "dilation");
        f(self.ceil_mode, "ceil_mode");
        f(self.count_include_pad, "count_include_pad");
        f(self.p, "p");
        f(self.global, "global");
        f(self.padding_mode, "padding_mode");
    }
    std::string name() const { return "pooling"; }
    op_traits traits() const { return {.batch_separable = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;

    struct geometry {
        std::vector<std::int64_t> in, kernel, out, stride, dilation, pad_begin, pad_end;
    };
    geometry geom(const shape& x) const;
};

// MaxPool with its Indices output: returns the tuple (values, int64 indices), each index
// the flat position of the maximum in x (row-major, or with H and W swapped when
// storage_order is 1, as ONNX defines).
struct pooling_with_indices : pooling {
    std::int64_t storage_order = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        pooling::reflect(self, f);
        f(self.storage_order, "storage_order");
    }
    std::string name() const { return "pooling_with_indices"; }
    // A tuple result: dynamic input dims are inferred here (the generic inference only
    // handles tensors).
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// MaxUnpool(x, indices[, output_shape]): zeros with x scattered to the positions in
// indices. Indices are flat positions in the inferred output, whose spatial dims are
// (in - 1) * stride + kernel - pad_begin - pad_end; an explicit output shape (attribute
// `output_size` when known at parse time, else the third input, read at run time) keeps
// each value at the same coordinates.
struct max_unpool {
    std::vector<std::int64_t> lengths, stride, padding;
    std::vector<std::int64_t> output_size;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.lengths, "lengths");
        f(self.stride, "stride");
        f(self.padding, "padding");
        f(self.output_size, "output_size");
    }
    std::string name() const { return "max_unpool"; }
    std::vector<std::size_t> default_lens(const shape& x) const;
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
