// ai.onnx.ml (LabelEncoder, TreeEnsemble, Binarizer, ArrayFeatureExtractor) and
// ai.onnx.preview.training (Adagrad, Adam, Momentum).
#include "onnx/onnx_node.hpp"
#include "ops/control_ml.hpp"
#include "ops/control_training.hpp"

#include <kiln/errors.hpp>

namespace kiln::onnx_frontend {

namespace {

std::vector<double> to_doubles(const literal& l) { return l.to_vector<double>(); }

// A LabelEncoder key or value list: <what>_strings / _int64s / _floats / _tensor.
std::optional<literal> encoder_list(onnx_node& node, const std::string& what) {
    if (node.has_attr(what + "_tensor")) {
        auto t = node.attr_tensor(what + "_tensor");
        auto n = t.get_shape().elements();
        return literal(t.get_argument().reshape(shape(t.get_shape().get_type(), {n})));
    }
    if (node.has_attr(what + "_strings")) {
        auto v = node.attr_strings(what + "_strings");
        return literal(shape(type::string, {v.size()}), v);
    }
    if (node.has_attr(what + "_int64s")) {
        auto v = node.attr_ints(what + "_int64s");
        return literal(shape(type::int64, {v.size()}), v);
    }
    if (node.has_attr(what + "_floats")) {
        auto v = node.attr_floats(what + "_floats");
        return literal(shape(type::float32, {v.size()}), v);
    }
    return std::nullopt;
}

std::vector<instruction_ref> parse_label_encoder(onnx_node& node) {
    auto keys = encoder_list(node, "keys");
    auto values = encoder_list(node, "values");
    if (!keys || !values) node.fail(error_code::parse, "needs keys_* and values_* attributes");
    op::label_encoder e{*keys, *values, {}};
    const auto vt = values->get_shape().get_type();
    if (node.has_attr("default_tensor")) {
        auto d = node.attr_tensor("default_tensor");
        e.default_value = literal(d.get_argument().reshape(shape(d.get_shape().get_type())));
    } else if (vt == type::string) {
        e.default_value = literal(shape(type::string), std::vector<std::string>{node.attr_string("default_string", "_Unused")});
    } else if (vt == type::int64) {
        e.default_value = literal(shape(type::int64), std::vector<std::int64_t>{node.attr_int("default_int64", -1)});
    } else {
        e.default_value = literal(shape(vt), std::vector<float>{node.attr_float("default_float", -0.0f)});
    }
    return {node.add(e, {node.input(0)})};
}

std::vector<instruction_ref> parse_tree_ensemble(onnx_node& node) {
    op::tree_ensemble t;
    t.aggregate_function = node.attr_int("aggregate_function", 1);
    t.post_transform = node.attr_int("post_transform", 0);
    t.n_targets = node.attr_int("n_targets");
    t.tree_roots = node.attr_ints("tree_roots");
    t.nodes_modes = node.attr_tensor("nodes_modes").to_vector<std::int64_t>();
    t.nodes_featureids = node.attr_ints("nodes_featureids");
    t.nodes_splits = to_doubles(node.attr_tensor("nodes_splits"));
    t.nodes_truenodeids = node.attr_ints("nodes_truenodeids");
    t.nodes_trueleafs = node.attr_ints("nodes_trueleafs");
    t.nodes_falsenodeids = node.attr_ints("nodes_falsenodeids");
    t.nodes_falseleafs = node.attr_ints("nodes_falseleafs");
    t.nodes_missing_value_tracks_true = node.attr_ints("nodes_missing_value_tracks_true", std::vector<std::int64_t>{});
    if (node.has_attr("membership_values")) t.membership_values = to_doubles(node.attr_tensor("membership_values"));
    t.leaf_targetids = node.attr_ints("leaf_targetids");
    t.leaf_weights = to_doubles(node.attr_tensor("leaf_weights"));
    return {node.add(t, {node.input(0)})};
}

std::vector<instruction_ref> parse_binarizer(onnx_node& node) {
    return {node.add(op::binarizer{node.attr_float("threshold", 0.0f)}, {node.input(0)})};
}

std::vector<instruction_ref> parse_array_feature_extractor(onnx_node& node) {
    return {node.add(op::array_feature_extractor{}, {node.input(0), node.input(1)})};
}

std::vector<instruction_ref> parse_adagrad(onnx_node& node) {
    op::adagrad a;
    a.decay_factor = node.attr_float("decay_factor", 0.0f);
    a.epsilon = node.attr_float("epsilon", 0.0f);
    a.norm_coefficient = node.attr_float("norm_coefficient", 0.0f);
    return node.unpack(node.add(a, node.present_inputs()), node.num_outputs());
}

std::vector<instruction_ref> parse_adam(onnx_node& node) {
    op::adam a;
    a.alpha = node.attr_float("alpha", 0.9f);
    a.beta = node.attr_float("beta", 0.999f);
    a.epsilon = node.attr_float("epsilon", 0.0f);
    a.norm_coefficient = node.attr_float("norm_coefficient", 0.0f);
    a.norm_coefficient_post = node.attr_float("norm_coefficient_post", 0.0f);
    return node.unpack(node.add(a, node.present_inputs()), node.num_outputs());
}

std::vector<instruction_ref> parse_momentum(onnx_node& node) {
    op::momentum m;
    m.alpha = node.attr_float("alpha");
    m.beta = node.attr_float("beta");
    m.norm_coefficient = node.attr_float("norm_coefficient");
    auto mode = node.attr_string("mode");
    if (mode != "standard" && mode != "nesterov") node.fail(error_code::parse, "unknown mode '" + mode + "'");
    m.nesterov = mode == "nesterov";
    return node.unpack(node.add(m, node.present_inputs()), node.num_outputs());
}

}  // namespace

KILN_ONNX_OP_DOMAIN("ai.onnx.ml", "LabelEncoder", parse_label_encoder)
KILN_ONNX_OP_DOMAIN("ai.onnx.ml", "TreeEnsemble", parse_tree_ensemble)
KILN_ONNX_OP_DOMAIN("ai.onnx.ml", "Binarizer", parse_binarizer)
KILN_ONNX_OP_DOMAIN("ai.onnx.ml", "ArrayFeatureExtractor", parse_array_feature_extractor)
KILN_ONNX_OP_DOMAIN("ai.onnx.preview.training", "Adagrad", parse_adagrad)
KILN_ONNX_OP_DOMAIN("ai.onnx.preview.training", "Adam", parse_adam)
KILN_ONNX_OP_DOMAIN("ai.onnx.preview.training", "Momentum", parse_momentum)

}  // namespace kiln::onnx_frontend
