#include "ops/control_ml.hpp"

#include "ops/common.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

namespace kiln::op {

namespace {

// One comparable key for an element of any type: strings as they are, integers and
// floats by value (so an int64 key matches an int64 input), NaN as one key.
std::string key_of(const argument& a, std::size_t i) {
    const auto t = a.get_shape().get_type();
    if (t == type::string) return "s" + a.to_vector<std::string>()[i];
    if (is_integer(t) || t == type::bool_) return "i" + std::to_string(a.get_int64(i));
    double d = a.get_double(i);
    if (std::isnan(d)) return "nan";
    std::ostringstream ss;
    ss.precision(17);
    ss << "f" << d;
    return ss.str();
}

// The inverse of the standard normal CDF, by Newton's method on erfc.
double probit(double p) {
    if (p <= 0) return -INFINITY;
    if (p >= 1) return INFINITY;
    double x = 0;
    for (int i = 0; i < 100; ++i) {
        double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
        double pdf = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
        if (pdf < 1e-300) break;
        double step = (cdf - p) / pdf;
        x -= std::clamp(step, -1.0, 1.0);
        if (std::fabs(step) < 1e-15) break;
    }
    return x;
}

}  // namespace

// ---- LabelEncoder ----

shape label_encoder::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("label_encoder", inputs, 1);
    const auto& ks = keys.get_shape();
    const auto& vs = values.get_shape();
    if (ks.ndim() != 1 || vs.ndim() != 1 || ks.elements() != vs.elements())
        throw_error(error_code::invalid_argument, "label_encoder: keys " + ks.to_string() + " and values " +
                                                      vs.to_string() + " must be 1-D of the same length");
    bool in_str = inputs[0].get_type() == type::string, key_str = ks.get_type() == type::string;
    if (in_str != key_str)
        throw_error(error_code::type, "label_encoder: input of type " + std::string(type_name(inputs[0].get_type())) +
                                          " cannot match keys of type " + std::string(type_name(ks.get_type())));
    if (default_value.get_shape().get_type() != vs.get_type() || default_value.get_shape().elements() != 1)
        throw_error(error_code::type, "label_encoder: the default must be one value of the values' type");
    return inputs[0].with_type(vs.get_type()).as_standard();
}

argument label_encoder::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& k = keys.get_argument();
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < k.get_shape().elements(); ++i) index.emplace(key_of(k, i), i);
    auto x = args[0].contiguous();
    argument r(out);
    visit(r, [&](auto view) {
        using C = std::remove_reference_t<decltype(view[0])>;
        const C* vals = values.get_argument().template data_as<C>();
        const C def = *default_value.get_argument().template data_as<C>();
        for (std::size_t i = 0; i < out.elements(); ++i) {
            auto it = index.find(key_of(x, i));
            view[i] = it == index.end() ? def : vals[it->second];
        }
    });
    return r;
}

// ---- TreeEnsemble ----

shape tree_ensemble::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("tree_ensemble", inputs, 1);
    check_rank("tree_ensemble", inputs[0], 2, 2, "X");
    if (!is_float(inputs[0].get_type()))
        throw_error(error_code::type, "tree_ensemble: X must be a float tensor");
    const auto n = nodes_modes.size();
    if (nodes_featureids.size() != n || nodes_splits.size() != n || nodes_truenodeids.size() != n ||
        nodes_falsenodeids.size() != n || nodes_trueleafs.size() != n || nodes_falseleafs.size() != n)
        throw_error(error_code::invalid_argument, "tree_ensemble: the nodes_* attributes differ in length");
    if (leaf_targetids.size() != leaf_weights.size())
        throw_error(error_code::invalid_argument, "tree_ensemble: leaf_targetids and leaf_weights differ in length");
    if (n_targets <= 0) throw_error(error_code::invalid_argument, "tree_ensemble: n_targets must be positive");
    auto dims = inputs[0].to_dynamic_dims();
    dims[1] = {std::size_t(n_targets), std::size_t(n_targets), {}};
    return shape::make_dynamic(inputs[0].get_type(), dims);
}

argument tree_ensemble::compute(const shape&, const std::vector<argument>& args) const {
    const auto& xs = args[0].get_shape();
    const std::size_t rows = xs.lens()[0], feats = xs.lens()[1];
    auto x = args[0].to_vector<double>();
    // Membership sets of the BRANCH_MEMBER nodes, in node order, separated by NaN.
    std::vector<std::vector<double>> sets(nodes_modes.size());
    {
        std::size_t at = 0;
        for (std::size_t i = 0; i < nodes_modes.size(); ++i) {
            if (nodes_modes[i] != 6) continue;
            while (at < membership_values.size() && !std::isnan(membership_values[at]))
                sets[i].push_back(membership_values[at++]);
            ++at;
        }
    }
    const auto T = static_cast<std::size_t>(n_targets);
    std::vector<double> out(rows * T, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
        std::vector<double> acc(T, 0.0);
        std::vector<bool> hit(T, false);
        for (auto root : tree_roots) {
            auto node = static_cast<std::size_t>(root);
            std::size_t guard = 0;
            while (true) {
                if (node >= nodes_modes.size() || ++guard > nodes_modes.size() + 1)
                    throw_error(error_code::invalid_argument, "tree_ensemble: a tree refers to a missing node");
                auto f = static_cast<std::size_t>(nodes_featureids[node]);
                if (f >= feats) throw_error(error_code::invalid_argument, "tree_ensemble: feature id out of range");
                double v = x[r * feats + f];
                // Compared in X's type: splits given as float must match float inputs exactly.
                double s = xs.get_type() == type::float64 ? nodes_splits[node] : double(float(nodes_splits[node]));
                bool go;
                if (std::isnan(v) && node < nodes_missing_value_tracks_true.size() &&
                    nodes_missing_value_tracks_true[node] != 0) {
                    go = true;
                } else {
                    switch (nodes_modes[node]) {
                        case 0: go = v <= s; break;
                        case 1: go = v < s; break;
                        case 2: go = v >= s; break;
                        case 3: go = v > s; break;
                        case 4: go = v == s; break;
                        case 5: go = v != s; break;
                        case 6: {
                            go = false;
                            for (double m : sets[node]) {
                                double mm = xs.get_type() == type::float64 ? m : double(float(m));
                                go = go || v == mm;
                            }
                            break;
                        }
                        default: throw_error(error_code::invalid_argument, "tree_ensemble: unknown node mode");
                    }
                }
                bool leaf = go ? nodes_trueleafs[node] != 0 : nodes_falseleafs[node] != 0;
                auto next = static_cast<std::size_t>(go ? nodes_truenodeids[node] : nodes_falsenodeids[node]);
                if (!leaf) {
                    node = next;
                    continue;
                }
                if (next >= leaf_weights.size()) throw_error(error_code::invalid_argument, "tree_ensemble: leaf out of range");
                auto t = static_cast<std::size_t>(leaf_targetids[next]);
                if (t >= T) throw_error(error_code::invalid_argument, "tree_ensemble: target id out of range");
                double w = leaf_weights[next];
                if (!hit[t]) acc[t] = w;
                else if (aggregate_function == 2) acc[t] = std::min(acc[t], w);
                else if (aggregate_function == 3) acc[t] = std::max(acc[t], w);
                else acc[t] += w;
                hit[t] = true;
                break;
            }
        }
        if (aggregate_function == 0 && !tree_roots.empty())
            for (auto& a : acc) a /= static_cast<double>(tree_roots.size());
        if (post_transform == 1 || post_transform == 3) {
            double mx = *std::max_element(acc.begin(), acc.end()), sum = 0;
            for (auto& a : acc) sum += (a = std::exp(a - mx));
            for (auto& a : acc) a /= sum;
        } else if (post_transform == 2) {
            for (auto& a : acc) a = 1.0 / (1.0 + std::exp(-a));
        } else if (post_transform == 4) {
            for (auto& a : acc) a = probit(a);
        }
        std::copy(acc.begin(), acc.end(), out.begin() + static_cast<std::ptrdiff_t>(r * T));
    }
    return literal(shape(xs.get_type(), {rows, T}), out).get_argument();
}

// ---- Binarizer / ArrayFeatureExtractor ----

shape binarizer::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("binarizer", inputs, 1);
    if (inputs[0].get_type() == type::string) throw_error(error_code::type, "binarizer: input must be numeric");
    return inputs[0].as_standard();
}

argument binarizer::compute(const shape& out, const std::vector<argument>& args) const {
    argument r(out);
    visit_numeric(out.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        tensor_view<C> in{args[0].data_as<C>(), args[0].get_shape()};
        for (std::size_t i = 0; i < out.elements(); ++i)
            r.data_as<C>()[i] = convert<C>(convert<double>(in[i]) > threshold ? 1.0 : 0.0);
    });
    return r;
}

shape array_feature_extractor::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs("array_feature_extractor", inputs, 2);
    if (!is_integer(inputs[1].get_type()))
        throw_error(error_code::type, "array_feature_extractor: indices must be integers");
    auto dims = inputs[0].to_dynamic_dims();
    if (dims.empty()) throw_error(error_code::shape, "array_feature_extractor: X must have rank 1 or more");
    auto k = inputs[1].dynamic() ? dynamic_dimension{0, dynamic_dimension::unbounded, {}}
                                 : dynamic_dimension{inputs[1].elements(), inputs[1].elements(), {}};
    if (dims.size() == 1) dims.insert(dims.begin(), dynamic_dimension{1, 1, {}});
    dims.back() = k;
    return shape::make_dynamic(inputs[0].get_type(), dims);
}

argument array_feature_extractor::compute(const shape&, const std::vector<argument>& args) const {
    auto x = args[0].contiguous();
    auto idx = to_int64_vector(args[1]);
    auto lens = x.get_shape().lens();
    const std::size_t last = lens.back();
    for (auto i : idx)
        if (i < 0 || static_cast<std::size_t>(i) >= last)
            throw_error(error_code::invalid_argument, "array_feature_extractor: index " + std::to_string(i) +
                                                          " out of range for " + std::to_string(last) + " features");
    const std::size_t outer = x.get_shape().elements() / std::max<std::size_t>(last, 1);
    if (lens.size() == 1) lens.insert(lens.begin(), 1);
    lens.back() = idx.size();
    argument r(shape(x.get_shape().get_type(), lens));
    visit_type(x.get_shape().get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        for (std::size_t o = 0; o < outer; ++o)
            for (std::size_t j = 0; j < idx.size(); ++j)
                r.data_as<C>()[o * idx.size() + j] = x.data_as<C>()[o * last + static_cast<std::size_t>(idx[j])];
    });
    return r;
}

KILN_REGISTER_OP(label_encoder)
KILN_REGISTER_OP(tree_ensemble)
KILN_REGISTER_OP(binarizer)
KILN_REGISTER_OP(array_feature_extractor)

}  // namespace kiln::op
