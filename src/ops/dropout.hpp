// Dropout (ONNX Dropout): inputs x, ratio (scalar), training_mode (scalar bool); output
// the tuple (y, mask). Outside training mode, or with ratio 0, y is x and the mask is all
// true. In training mode each element is kept with probability 1 - ratio and scaled by
// 1 / (1 - ratio). With a seed the draws are NumPy's (numpy.random.seed(seed), then
// uniform(0, 1) per element in row-major order), as the ONNX reference makes them;
// without one they are random and the op is nondeterministic.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::op {

struct dropout_op {
    std::optional<std::int64_t> seed;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.seed, "seed");
    }
    std::string name() const { return "dropout"; }
    op_traits traits() const { return {.nondeterministic = !seed.has_value()}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& output, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
