// Ops that only re-describe a tensor's memory: reshape, flatten, squeeze, unsqueeze,
// transpose and broadcast. They are views (output_alias 0: the memory planner gives
// them no buffer) wherever the input layout allows; reshape and flatten of a
// non-row-major input copy. The *_dynamic forms take their shape or axes as a run-time
// input and turn into the static op once that input is a literal.
#pragma once
#include "ops/tensor_common.hpp"

namespace kiln::op {

// ONNX Reshape: 0 copies the input dimension (unless allowzero), -1 is inferred.
struct reshape {
    std::vector<std::int64_t> dims;
    bool allowzero = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.dims, "dims");
        f(self.allowzero, "allowzero");
    }
    std::string name() const { return "reshape"; }
    op_traits traits() const { return {.reshape_like = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& in) const;
};

// The output lens of an ONNX Reshape of `in` to `dims`.
std::vector<std::size_t> reshape_lens(const std::vector<std::size_t>& in, const std::vector<std::int64_t>& dims,
                                      bool allowzero, const std::string& op_name);

struct reshape_dynamic {
    bool allowzero = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.allowzero, "allowzero"); }
    std::string name() const { return "reshape_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

struct flatten {
    std::int64_t axis = 1;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axis, "axis"); }
    std::string name() const { return "flatten"; }
    op_traits traits() const { return {.reshape_like = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>& in) const;
};

// Removes the listed dimensions of length 1 (all of them when `axes` is empty).
struct squeeze {
    std::vector<std::int64_t> axes;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axes, "axes"); }
    std::string name() const { return "squeeze"; }
    op_traits traits() const { return {.reshape_like = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const { return args[0].reshape(out); }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// Inserts dimensions of length 1 at `axes` (positions in the output).
struct unsqueeze {
    std::vector<std::int64_t> axes;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axes, "axes"); }
    std::string name() const { return "unsqueeze"; }
    op_traits traits() const { return {.reshape_like = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const { return args[0].reshape(out); }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// Squeeze/Unsqueeze whose axes are a run-time input (input 1).
struct squeeze_dynamic {
    bool unsqueeze = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.unsqueeze, "unsqueeze"); }
    std::string name() const { return "squeeze_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

// Permutes dimensions by permuting strides (empty perm reverses them). Always a view.
struct transpose {
    std::vector<std::int64_t> perm;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.perm, "perm"); }
    std::string name() const { return "transpose"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const { return args[0].reshape(out); }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

// ONNX Expand: bidirectional broadcast to `dims`, as a stride-0 view.
struct broadcast {
    std::vector<std::int64_t> dims;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.dims, "dims"); }
    std::string name() const { return "broadcast"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const { return args[0].reshape(out); }
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
};

struct expand_dynamic {
    std::string name() const { return "expand_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::ptrdiff_t output_alias(const std::vector<shape>&) const { return 0; }
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

// ONNX Shape of a tensor whose dims are only known at run time (static ones become
// literals at parse time). start/end follow Shape-15.
struct shape_of {
    std::int64_t start = 0;
    std::optional<std::int64_t> end;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.start, "start");
        f(self.end, "end");
    }
    std::string name() const { return "shape_of"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    // Of a static input: the dims as values, where shape inference over named dims
    // samples them (the source of every value of exporters' shape arithmetic).
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    // The [begin, end) range of dimensions selected for a tensor of `rank`.
    std::pair<std::size_t, std::size_t> range(std::size_t rank) const;
    // The selected dimensions when they are all fixed (the input may still be dynamic
    // elsewhere, e.g. a dynamic batch with Shape(start=1)); nullopt otherwise.
    std::optional<std::vector<std::int64_t>> known_dims(const shape& in) const;
};

// ONNX Size of a tensor whose dims are only known at run time.
struct size_of {
    std::string name() const { return "size_of"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
