// Normalization ops. Each keeps one IR op per concept so that fusion and the CPU
// lowering (oneDNN layer/batch normalization) can match them:
//   layer_norm{axis, epsilon}(x, scale[, bias])      -> y
//   layer_norm_stats{axis, epsilon, stash}(x)        -> (mean, inv_std_dev)  [training stash outputs]
//   rms_norm{axis, epsilon}(x, scale)                -> y
//   batch_norm_inference{epsilon}(x, scale, bias, mean, var) -> y
//   batch_norm_training{epsilon, momentum}(x, scale, bias, mean, var) -> (y, running_mean, running_var)
//   instance_norm{epsilon}(x, scale, bias)           -> y
//   group_norm{num_groups, epsilon, per_group_scale}(x, scale, bias) -> y
//   lp_norm{axis, p}(x), mean_variance_norm{axes}(x), lrn{alpha, beta, bias, size}(x)
// Axes are normalized (non-negative) by the parser. Scale and bias of layer_norm and
// rms_norm broadcast (NumPy rules) against x.
#pragma once
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

struct layer_norm {
    std::int64_t axis = -1;
    float epsilon = 1e-5f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.epsilon, "epsilon");
    }
    std::string name() const { return "layer_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct layer_norm_stats {
    std::int64_t axis = -1;
    float epsilon = 1e-5f;
    type stash = type::float32;  // element type of mean and inv_std_dev (ONNX stash_type)
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.epsilon, "epsilon");
        f(self.stash, "stash");
    }
    std::string name() const { return "layer_norm_stats"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct rms_norm {
    std::int64_t axis = -1;
    float epsilon = 1e-5f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.epsilon, "epsilon");
    }
    std::string name() const { return "rms_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct batch_norm_inference {
    float epsilon = 1e-5f;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.epsilon, "epsilon"); }
    std::string name() const { return "batch_norm_inference"; }
    // y = (x - mean) / sqrt(var + eps) * scale + bias as y = x * s + t, one s and t per
    // channel, in double: what passes and kernels that fold the op compute.
    struct channel_scale_shift {
        std::vector<double> s, t;
    };
    channel_scale_shift scale_shift(const std::vector<double>& scale, const std::vector<double>& bias,
                                    const std::vector<double>& mean, const std::vector<double>& var) const;
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct batch_norm_training {
    float epsilon = 1e-5f;
    float momentum = 0.9f;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.epsilon, "epsilon");
        f(self.momentum, "momentum");
    }
    std::string name() const { return "batch_norm_training"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct instance_norm {
    float epsilon = 1e-5f;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.epsilon, "epsilon"); }
    std::string name() const { return "instance_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct group_norm {
    std::int64_t num_groups = 1;
    float epsilon = 1e-5f;
    bool per_group_scale = false;  // GroupNormalization-18: scale and bias have one value per group
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.num_groups, "num_groups");
        f(self.epsilon, "epsilon");
        f(self.per_group_scale, "per_group_scale");
    }
    std::string name() const { return "group_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct lp_norm {
    std::int64_t axis = -1;
    std::int64_t p = 2;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.axis, "axis");
        f(self.p, "p");
    }
    std::string name() const { return "lp_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct mean_variance_norm {
    std::vector<std::int64_t> axes{0, 2, 3};
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.axes, "axes"); }
    std::string name() const { return "mean_variance_norm"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct lrn {
    float alpha = 1e-4f;
    float beta = 0.75f;
    float bias = 1.0f;
    std::int64_t size = 1;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.alpha, "alpha");
        f(self.beta, "beta");
        f(self.bias, "bias");
        f(self.size, "size");
    }
    std::string name() const { return "lrn"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
