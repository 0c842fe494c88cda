// Classic ML (ai.onnx.ml): LabelEncoder, TreeEnsemble, Binarizer, ArrayFeatureExtractor.
#pragma once
#include <kiln/literal.hpp>
#include <kiln/operation.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::op {

// Maps each input element found in `keys` to the value at the same position, others
// to `default_value`. Keys and values are 1-D literals of any type.
struct label_encoder {
    literal keys;
    literal values;
    literal default_value;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.keys, "keys");
        f(self.values, "values");
        f(self.default_value, "default_value");
    }
    std::string name() const { return "label_encoder"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// ai.onnx.ml TreeEnsemble (opset 5): input [N, F], output [N, n_targets].
struct tree_ensemble {
    std::int64_t aggregate_function = 1;  // 0 average, 1 sum, 2 min, 3 max
    std::int64_t post_transform = 0;      // 0 none, 1 softmax, 2 logistic, 3 softmax_zero, 4 probit
    std::int64_t n_targets = 1;
    std::vector<std::int64_t> tree_roots;
    std::vector<std::int64_t> nodes_modes;
    std::vector<std::int64_t> nodes_featureids;
    std::vector<double> nodes_splits;
    std::vector<std::int64_t> nodes_truenodeids;
    std::vector<std::int64_t> nodes_trueleafs;
    std::vector<std::int64_t> nodes_falsenodeids;
    std::vector<std::int64_t> nodes_falseleafs;
    std::vector<std::int64_t> nodes_missing_value_tracks_true;
    std::vector<double> membership_values;
    std::vector<std::int64_t> leaf_targetids;
    std::vector<double> leaf_weights;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.aggregate_function, "aggregate_function");
        f(self.post_transform, "post_transform");
        f(self.n_targets, "n_targets");
        f(self.tree_roots, "tree_roots");
        f(self.nodes_modes, "nodes_modes");
        f(self.nodes_featureids, "nodes_featureids");
        f(self.nodes_splits, "nodes_splits");
        f(self.nodes_truenodeids, "nodes_truenodeids");
        f(self.nodes_trueleafs, "nodes_trueleafs");
        f(self.nodes_falsenodeids, "nodes_falsenodeids");
        f(self.nodes_falseleafs, "nodes_falseleafs");
        f(self.nodes_missing_value_tracks_true, "nodes_missing_value_tracks_true");
        f(self.membership_values, "membership_values");
        f(self.leaf_targetids, "leaf_targetids");
        f(self.leaf_weights, "leaf_weights");
    }
    std::string name() const { return "tree_ensemble"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

struct binarizer {
    float threshold = 0;
    template <class Self, class F>
    static void reflect(Self& self, F f) { f(self.threshold, "threshold"); }
    std::string name() const { return "binarizer"; }
    op_traits traits() const { return {.pointwise = true}; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

// Gathers along the last axis; a 1-D input gives [1, k].
struct array_feature_extractor {
    std::string name() const { return "array_feature_extractor"; }
    shape compute_shape(const std::vector<shape>& inputs) const;
    argument compute(const shape& out, const std::vector<argument>& args) const;
};

}  // namespace kiln::op
