// Ops that make tensors from a few values: constant_of_shape (run-time shape; a known
// shape becomes a broadcast literal), range, eye_like, one_hot and trilu.
#pragma once
#include "ops/tensor_common.hpp"

#include <kiln/literal.hpp>

namespace kiln::op {

// ConstantOfShape with the shape as a run-time input; `value` is a one-element literal.
struct constant_of_shape {
    literal value;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.value, "value"); }
    std::string name() const { return "constant_of_shape"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    // With the sizes known at compile time, their shape, without making the tensor (Mask
    // R-CNN's zeros of [RoIs, 256, 14, 14]: too large to compute while shapes are inferred).
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Range(start, limit, delta): its length depends on the values, so the output is dynamic.
struct range {
    std::string name() const { return "range"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// EyeLike: ones on diagonal k of a 2-D tensor shaped like the input.
struct eye_like {
    std::int64_t k = 0;
    std::optional<type> dtype;  // the input's type when absent
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.k, "k");
        f(self.dtype, "dtype");
    }
    std::string name() const { return "eye_like"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// OneHot(indices, values) with a known depth; one_hot_dynamic takes depth as input 1.
struct one_hot {
    std::int64_t axis = -1;
    std::int64_t depth = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.depth, "depth");
    }
    std::string name() const { return "one_hot"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct one_hot_dynamic {
    std::int64_t axis = -1;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axis, "axis"); }
    std::string name() const { return "one_hot_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

// OneHot's depth input: a one-element tensor of any numeric type.
std::int64_t read_depth(const argument& a, const std::string& op_name);

// Trilu: keeps the upper (or lower) triangle of the last two dims, relative to diagonal k
// (input 1, a scalar, when present).
struct trilu {
    bool upper = true;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.upper, "upper"); }
    std::string name() const { return "trilu"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
