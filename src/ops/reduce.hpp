// The reduction family: reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod,
// reduce_l1, reduce_l2, reduce_log_sum, reduce_log_sum_exp, reduce_sum_square.
//
// One input: `axes` holds the reduced axes, sorted and non-negative; an empty list
// reduces over no axis (ONNX noop_with_empty_axes), so the parser resolves "all axes"
// into the explicit list. Fusion and lowering match this form.
// Two inputs: the axes come at run time from input 1 (ONNX axes input that is not a
// constant) with ONNX semantics (negative axes, empty = all unless
// noop_with_empty_axes); the output shape is then dynamic.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

enum class reduce_kind { sum, mean, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square };

struct reduce_base {
    std::vector<std::int64_t> axes;
    bool keepdims = true;
    bool noop_with_empty_axes = false;  // used by the run-time-axes form only

    shape compute_shape(reduce_kind k, const std::string& name, const std::vector<shape>& inputs) const;
    argument compute(reduce_kind k, const std::string& name, const std::vector<argument>& args) const;
};

template <reduce_kind K>
struct reduce_op : reduce_base {
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axes, "axes");
        f(self.keepdims, "keepdims");
        f(self.noop_with_empty_axes, "noop_with_empty_axes");
    }
    std::string name() const;
    op_traits traits() const { return {.handles_dynamic = true, .reduction = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const { return reduce_base::compute_shape(K, name(), inputs); }
    argument compute(const shape&, const std::vector<argument>& args) const {
        return reduce_base::compute(K, name(), args);
    }
};

using reduce_sum = reduce_op<reduce_kind::sum>;
using reduce_mean = reduce_op<reduce_kind::mean>;
using reduce_max = reduce_op<reduce_kind::max>;
using reduce_min = reduce_op<reduce_kind::min>;
using reduce_prod = reduce_op<reduce_kind::prod>;
using reduce_l1 = reduce_op<reduce_kind::l1>;
using reduce_l2 = reduce_op<reduce_kind::l2>;
using reduce_log_sum = reduce_op<reduce_kind::log_sum>;
using reduce_log_sum_exp = reduce_op<reduce_kind::log_sum_exp>;
using reduce_sum_square = reduce_op<reduce_kind::sum_square>;

std::string reduce_name(reduce_kind k);
template <reduce_kind K>
std::string reduce_op<K>::name() const { return reduce_name(K); }

}  // namespace kiln::op
