// Loss ops: nll_loss{reduction, ignore_index}(input, target[, weight]) -> loss and
// softmax_cross_entropy_loss{reduction, ignore_index}(scores, labels[, weights])
// -> (loss, log_prob). `reduction` is "none", "sum" or "mean"; `ignore_index` is
// absent (null) when the model sets none.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::op {

struct nll_loss {
    std::string reduction = "mean";
    std::optional<std::int64_t> ignore_index;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.reduction, "reduction");
        f(self.ignore_index, "ignore_index");
    }
    std::string name() const { return "nll_loss"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct softmax_cross_entropy_loss {
    std::string reduction = "mean";
    std::optional<std::int64_t> ignore_index;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.reduction, "reduction");
        f(self.ignore_index, "ignore_index");
    }
    std::string name() const { return "softmax_cross_entropy_loss"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
