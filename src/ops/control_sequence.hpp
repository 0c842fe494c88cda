// Sequences and optionals: values that hold a list of tensors, or maybe one value.
// Their items are owned copies (never views of planned buffers), so a sequence may
// outlive the instruction that produced each item.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

struct sequence_construct {
    std::string name() const { return "sequence_construct"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct sequence_empty {
    type dtype = type::float32;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.dtype, "dtype"); }
    std::string name() const { return "sequence_empty"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs: sequence, position (negative counts from the back). Returns the item itself.
struct sequence_at {
    std::string name() const { return "sequence_at"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    // The result is memory the sequence holds.
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// Inputs: sequence, tensor, [position] (default: at the back).
struct sequence_insert {
    std::string name() const { return "sequence_insert"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Inputs: sequence, [position] (default: the last item).
struct sequence_erase {
    std::string name() const { return "sequence_erase"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct sequence_length {
    std::string name() const { return "sequence_length"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Splits a tensor along `axis`. The sizes come from `split` (when known at parse
// time), else from a run-time second input (a scalar chunk size or a 1-D list), else
// pieces of size 1 (squeezed unless keepdims).
struct split_to_sequence {
    std::int64_t axis = 0;
    bool keepdims = true;
    bool has_split = false;      // sizes known: `split`, or one chunk size when split_scalar
    bool split_scalar = false;
    std::vector<std::int64_t> split;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.keepdims, "keepdims");
        f(self.has_split, "has_split");
        f(self.split_scalar, "split_scalar");
        f(self.split, "split");
    }
    std::string name() const { return "split_to_sequence"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    // The piece sizes along the axis of length `len` (split values from `sizes`).
    std::vector<std::size_t> piece_sizes(std::size_t len, const std::vector<std::int64_t>& sizes, bool scalar) const;
};

struct concat_from_sequence {
    std::int64_t axis = 0;
    bool new_axis = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.new_axis, "new_axis");
    }
    std::string name() const { return "concat_from_sequence"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// ONNX Optional: wraps its input, or (no input) makes an empty optional of `element`.
struct make_optional {
    shape element;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.element, "element"); }
    std::string name() const { return "optional"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// True unless the input is an empty optional (tensors and sequences are present).
struct optional_has_element {
    std::string name() const { return "optional_has_element"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// The optional's value (tensors and sequences pass through); empty is an error.
struct optional_get_element {
    std::string name() const { return "optional_get_element"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

}  // namespace kiln::op
