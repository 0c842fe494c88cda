// Cutting and joining: slice, concat, split, pad, tile. Slice with positive steps and
// split are views; the others write a fresh row-major result. The *_dynamic forms take
// their shape-determining values as run-time inputs.
#pragma once
#include "ops/tensor_common.hpp"

namespace kiln::op {

// ONNX Slice (starts/ends clamped as the spec says; negative steps walk backwards).
struct slice {
    std::vector<std::int64_t> axes;  // empty: 0..starts.size()-1
    std::vector<std::int64_t> starts;
    std::vector<std::int64_t> ends;
    std::vector<std::int64_t> steps;  // empty: all 1
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axes, "axes");
        f(self.starts, "starts");
        f(self.ends, "ends");
        f(self.steps, "steps");
    }
    std::string name() const { return "slice"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const;

    // Per input dimension: first index, step and output length.
    struct plan {
        std::vector<std::int64_t> first, step;
        std::vector<std::size_t> lens;
    };
    plan make_plan(const std::vector<std::size_t>& in_lens) const;
};

// Slice(data, starts, ends[, axes[, steps]]) with run-time values.
struct slice_dynamic {
    std::string name() const { return "slice_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
    slice make_slice(const std::vector<argument>& args) const;
};

struct concat {
    std::int64_t axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axis, "axis"); }
    std::string name() const { return "concat"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Splits along `axis` into parts of the given sizes; a tuple of views.
struct split {
    std::int64_t axis = 0;
    std::vector<std::int64_t> sizes;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.sizes, "sizes");
    }
    std::string name() const { return "split"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// Split into `count` parts: sizes from input 1 at run time, or (no input 1) as even as
// ONNX's num_outputs rule makes them once the dimension is known.
struct split_dynamic {
    std::int64_t axis = 0;
    std::size_t count = 1;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.count, "count");
    }
    std::string name() const { return "split_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

// Even split sizes for `count` parts of a dimension of length `len` (ONNX Split-18).
std::vector<std::int64_t> even_split(std::size_t len, std::size_t count);

// ONNX Pad: pads are the begins then the ends over `axes` (empty: every axis);
// negative pads crop. Input 1, when present, is the constant value (a scalar).
struct pad {
    std::string mode = "constant";  // constant, reflect, edge, wrap
    std::vector<std::int64_t> pads;
    std::vector<std::int64_t> axes;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.mode, "mode");
        f(self.pads, "pads");
        f(self.axes, "axes");
    }
    std::string name() const { return "pad"; }
    bool fills_with_value() const { return mode == "constant"; }  // else copies of x's own elements
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Pad(data, pads[, value[, axes]]) with run-time pads; `has_value` says input 2 is the value.
struct pad_dynamic {
    std::string mode = "constant";
    bool has_value = false;
    bool has_axes = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.mode, "mode");
        f(self.has_value, "has_value");
        f(self.has_axes, "has_axes");
    }
    std::string name() const { return "pad_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

// Full-rank pads from ONNX pads over `axes` (empty: all axes).
std::vector<std::int64_t> expand_pads(const std::vector<std::int64_t>& pads, const std::vector<std::int64_t>& axes,
                                      std::size_t rank, const std::string& op_name);

struct tile {
    std::vector<std::int64_t> repeats;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.repeats, "repeats"); }
    std::string name() const { return "tile"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct tile_dynamic {
    std::string name() const { return "tile_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

}  // namespace kiln::op
