// Ops that walk along one axis: cumsum/cumprod (exclusive, reverse) and
// reverse_sequence. The cumulative axis is a run-time input (ONNX makes it a tensor);
// it never changes the output shape.
#pragma once
#include "ops/tensor_common.hpp"

namespace kiln::op {

template <bool Prod>
struct cumulative {
    bool exclusive = false;
    bool reverse = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.exclusive, "exclusive");
        f(self.reverse, "reverse");
    }
    std::string name() const { return Prod ? "cumprod" : "cumsum"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};
using cumsum = cumulative<false>;
using cumprod = cumulative<true>;

// ReverseSequence(x, sequence_lens): reverses the first sequence_lens[b] entries along
// time_axis for each b along batch_axis.
struct reverse_sequence {
    std::int64_t batch_axis = 1;
    std::int64_t time_axis = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.batch_axis, "batch_axis");
        f(self.time_axis, "time_axis");
    }
    std::string name() const { return "reverse_sequence"; }
    shape compute_shape(const std::vector<shape>& in) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
