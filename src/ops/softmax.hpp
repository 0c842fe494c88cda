// softmax{axis}, log_softmax{axis} and hardmax{axis} over one axis (ONNX opset >= 13
// semantics; the parser maps the older flatten-to-2-D form onto these). `axis` is
// normalized (non-negative) by the parser.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

enum class softmax_kind { softmax, log_softmax, hardmax };

struct softmax_base {
    std::int64_t axis = -1;
    shape compute_shape(const std::string& name, const std::vector<shape>& inputs) const;
    argument compute(softmax_kind k, const std::string& name, const std::vector<argument>& args) const;
};

template <softmax_kind K>
struct softmax_op : softmax_base {
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axis, "axis"); }
    std::string name() const {
        return K == softmax_kind::softmax ? "softmax" : K == softmax_kind::log_softmax ? "log_softmax" : "hardmax";
    }
    shape compute_shape(const std::vector<shape>& inputs) const { return softmax_base::compute_shape(name(), inputs); }
    argument compute(const shape&, const std::vector<argument>& args) const {
        return softmax_base::compute(K, name(), args);
    }
};

using softmax = softmax_op<softmax_kind::softmax>;
using log_softmax = softmax_op<softmax_kind::log_softmax>;
using hardmax = softmax_op<softmax_kind::hardmax>;

// Softmax / log-softmax of n values with stride `stride` starting at p (in place, in
// double). Shared with the loss and attention kernels.
void softmax_inplace(double* p, std::size_t n, std::size_t stride, bool log);

}  // namespace kiln::op
