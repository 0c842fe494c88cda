// Ops that pick elements by value: argmax/argmin, topk, nonzero, unique, compress.
// The last three have value-dependent output shapes (dynamic); topk_dynamic takes k at
// run time. Multi-output ops return tuples.
#pragma once
#include "ops/tensor_common.hpp"

namespace kiln::op {

// ArgMax / ArgMin along one axis; ties pick the first index unless select_last_index.
// Output int64.
template <bool Max>
struct arg_reduce {
    std::int64_t axis = 0;
    bool keepdims = true;
    bool select_last_index = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.keepdims, "keepdims");
        f(self.select_last_index, "select_last_index");
    }
    std::string name() const { return Max ? "argmax" : "argmin"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};
using argmax = arg_reduce<true>;
using argmin = arg_reduce<false>;

// TopK with a known k: tuple (values, int64 indices). Equal values keep their input
// order (the lower index first), as the ONNX spec asks.
struct topk {
    std::int64_t axis = -1;
    std::int64_t k = 1;
    bool largest = true;
    bool sorted = true;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.k, "k");
        f(self.largest, "largest");
        f(self.sorted, "sorted");
    }
    std::string name() const { return "topk"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// TopK(x, k) with k read at run time.
struct topk_dynamic {
    std::int64_t axis = -1;
    bool largest = true;
    bool sorted = true;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.largest, "largest");
        f(self.sorted, "sorted");
    }
    std::string name() const { return "topk_dynamic"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
    std::optional<static_form> to_static(const known_inputs& k) const;
    shape compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
        return shape_from_known(*this, in, k);
    }
};

// NonZero: int64 [rank, count] coordinates of the non-zero elements, row-major order.
struct nonzero {
    std::string name() const { return "nonzero"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Unique: tuple (values, first indices, inverse indices, counts), over elements of the
// flattened input or over slices along `axis`.
struct unique {
    std::optional<std::int64_t> axis;
    bool sorted = true;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.sorted, "sorted");
    }
    std::string name() const { return "unique"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Compress(data, condition) with a run-time condition (a known one becomes a gather).
struct compress {
    std::optional<std::int64_t> axis;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axis, "axis"); }
    std::string name() const { return "compress"; }
    op_traits traits() const { return {.handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Positions of the true entries of a Compress condition (checked against `len`).
std::vector<std::int64_t> compress_indices(const argument& condition, std::size_t len, const std::string& op_name);

}  // namespace kiln::op
