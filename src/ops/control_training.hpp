// ai.onnx.preview.training optimizers (one update step each) and the random
// generators. Optimizer inputs: R (learning rate), T (step count), then groups of n
// tensors each (X..., G..., and the optimizer's state); outputs are tuples of the
// updated tensors in ONNX output order.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::op {

struct adagrad {
    float decay_factor = 0;
    float epsilon = 0;
    float norm_coefficient = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.decay_factor, "decay_factor");
        f(self.epsilon, "epsilon");
        f(self.norm_coefficient, "norm_coefficient");
    }
    std::string name() const { return "adagrad"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct adam {
    float alpha = 0.9f;
    float beta = 0.999f;
    float epsilon = 0;
    float norm_coefficient = 0;
    float norm_coefficient_post = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
        f(self.beta, "beta");
        f(self.epsilon, "epsilon");
        f(self.norm_coefficient, "norm_coefficient");
        f(self.norm_coefficient_post, "norm_coefficient_post");
    }
    std::string name() const { return "adam"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct momentum {
    float alpha = 0;
    float beta = 0;
    float norm_coefficient = 0;
    bool nesterov = false;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
        f(self.beta, "beta");
        f(self.norm_coefficient, "norm_coefficient");
        f(self.nesterov, "nesterov");
    }
    std::string name() const { return "momentum"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// RandomUniform / RandomNormal and their *Like forms, and Bernoulli. Without a seed
// every run draws new numbers; with one, every run draws the same.
enum class random_kind : std::uint8_t { uniform, normal, bernoulli };

struct random_op {
    random_kind kind = random_kind::uniform;
    float a = 0;  // low / mean
    float b = 1;  // high / scale
    std::optional<float> seed;
    std::optional<type> dtype;  // default: the input's type (Like, Bernoulli) or float32
    std::vector<std::size_t> lens;  // the shape when there is no input
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.kind, "kind");
        f(self.a, "a");
        f(self.b, "b");
        f(self.seed, "seed");
        f(self.dtype, "dtype");
        f(self.lens, "shape");
    }
    std::string name() const { return "random"; }
    op_traits traits() const { return {.nondeterministic = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
