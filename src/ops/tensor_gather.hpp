// Indexing ops: gather, gather_elements, gather_nd and their scatter counterparts
// (scatter_elements, scatter_nd with the ONNX reductions, and tensor_scatter, the KV
// cache update). Indices may be negative (counted from the end); out-of-range indices
// raise a kiln error naming the op, never undefined behaviour.
#pragma once
#include "ops/tensor_common.hpp"

namespace kiln::op {

struct gather {
    std::int64_t axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axis, "axis"); }
    std::string name() const { return "gather"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct gather_elements {
    std::int64_t axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axis, "axis"); }
    std::string name() const { return "gather_elements"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct gather_nd {
    std::int64_t batch_dims = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.batch_dims, "batch_dims"); }
    std::string name() const { return "gather_nd"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// ScatterElements (and the deprecated Scatter): reduction none, add, mul, max or min.
struct scatter_elements {
    std::int64_t axis = 0;
    std::string reduction = "none";
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.reduction, "reduction");
    }
    std::string name() const { return "scatter_elements"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct scatter_nd {
    std::string reduction = "none";
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.reduction, "reduction"); }
    std::string name() const { return "scatter_nd"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// TensorScatter-24: writes `update` into a copy of `past_cache` along `axis` at each
// batch entry's write index (input 2, zeros when absent); "circular" wraps around.
struct tensor_scatter {
    std::int64_t axis = -2;
    std::string mode = "linear";
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.mode, "mode");
    }
    std::string name() const { return "tensor_scatter"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Reads an index tensor as int64 and wraps negative values into [0, dim) for the axis
// dimension(s) given by dim_of(i); out of range throws naming the op.
std::int64_t checked_index(std::int64_t v, std::size_t dim, const std::string& op_name);

}  // namespace kiln::op
