// DFT, STFT, the window functions, MelWeightMatrix, and the random generators.
#include "onnx/onnx_node.hpp"
#include "ops/control_signal.hpp"
#include "ops/control_training.hpp"

#include <kiln/errors.hpp>

namespace kiln::onnx_frontend {

namespace {

std::optional<std::int64_t> constant_scalar(onnx_node& node, std::size_t i) {
    auto c = node.constant_input(i);
    if (!c || c->get_shape().elements() != 1) return std::nullopt;
    return c->get_int64(0);
}

std::vector<instruction_ref> parse_dft(onnx_node& node) {
    op::dft d;
    auto x = node.input(0);
    d.inverse = node.attr_int("inverse", 0) != 0;
    d.onesided = node.attr_int("onesided", 0) != 0;
    std::vector<instruction_ref> args{x};
    if (node.has_input(1)) {
        if (auto n = constant_scalar(node, 1)) {
            if (*n <= 0) node.fail(error_code::parse, "dft_length must be positive");
            d.dft_length = *n;
        } else {
            d.length_input = true;
            args.push_back(node.input(1));
        }
    }
    if (node.opset() >= 20) {
        d.axis = -2;
        if (node.has_input(2)) {
            if (auto a = constant_scalar(node, 2)) {
                d.axis = *a;
            } else {
                d.axis_input = true;
                args.push_back(node.input(2));
            }
        }
    } else {
        d.axis = node.attr_int("axis", 1);
    }
    return {node.add(d, args)};
}

std::vector<instruction_ref> parse_stft(onnx_node& node) {
    op::stft s;
    s.onesided = node.attr_int("onesided", 1) != 0;
    std::vector<instruction_ref> args{node.input(0), node.input(1)};
    if (auto st = constant_scalar(node, 1)) s.frame_step = *st;
    if (node.has_input(2)) {
        s.has_window = true;
        args.push_back(node.input(2));
        const auto& ws = node.input(2)->get_shape();
        if (!ws.dynamic() && ws.ndim() == 1) s.frame_length = static_cast<std::int64_t>(ws.lens()[0]);
    }
    if (node.has_input(3)) {
        s.has_frame_length = true;
        args.push_back(node.input(3));
        if (auto fl = constant_scalar(node, 3)) s.frame_length = *fl;
    }
    return {node.add(s, args)};
}

template <op::window_kind Kind>
std::vector<instruction_ref> parse_window(onnx_node& node) {
    op::window_function w;
    w.kind = Kind;
    w.periodic = node.attr_int("periodic", 1) != 0;
    w.dtype = from_onnx_type(static_cast<int>(node.attr_int("output_datatype", 1)), node.describe());
    if (auto n = constant_scalar(node, 0)) w.size = *n;
    return {node.add(w, {node.input(0)})};
}

std::vector<instruction_ref> parse_mel_weight_matrix(onnx_node& node) {
    op::mel_weight_matrix m;
    m.dtype = from_onnx_type(static_cast<int>(node.attr_int("output_datatype", 1)), node.describe());
    if (auto n = constant_scalar(node, 0)) m.num_mel_bins = *n;
    if (auto n = constant_scalar(node, 1)) m.dft_length = *n;
    std::vector<instruction_ref> args;
    for (std::size_t i = 0; i < 5; ++i) args.push_back(node.input(i));
    return {node.add(m, args)};
}

op::random_op random_common(onnx_node& node, op::random_kind kind) {
    op::random_op r;
    r.kind = kind;
    if (node.has_attr("seed")) r.seed = node.attr_float("seed");
    if (node.has_attr("dtype"))
        r.dtype = from_onnx_type(static_cast<int>(node.attr_int("dtype")), node.describe() + " dtype");
    if (kind == op::random_kind::uniform) {
        r.a = node.attr_float("low", 0.0f);
        r.b = node.attr_float("high", 1.0f);
    } else if (kind == op::random_kind::normal) {
        r.a = node.attr_float("mean", 0.0f);
        r.b = node.attr_float("scale", 1.0f);
    }
    return r;
}

std::vector<instruction_ref> parse_random_fixed(onnx_node& node, op::random_kind kind) {
    auto r = random_common(node, kind);
    if (!r.dtype) r.dtype = type::float32;
    for (auto d : node.attr_ints("shape")) {
        if (d < 0) node.fail(error_code::parse, "negative dimension in 'shape'");
        r.lens.push_back(static_cast<std::size_t>(d));
    }
    return {node.add(r, {})};
}

std::vector<instruction_ref> parse_random_uniform(onnx_node& node) {
    return parse_random_fixed(node, op::random_kind::uniform);
}
std::vector<instruction_ref> parse_random_normal(onnx_node& node) {
    return parse_random_fixed(node, op::random_kind::normal);
}
std::vector<instruction_ref> parse_random_uniform_like(onnx_node& node) {
    return {node.add(random_common(node, op::random_kind::uniform), {node.input(0)})};
}
std::vector<instruction_ref> parse_random_normal_like(onnx_node& node) {
    return {node.add(random_common(node, op::random_kind::normal), {node.input(0)})};
}
std::vector<instruction_ref> parse_bernoulli(onnx_node& node) {
    return {node.add(random_common(node, op::random_kind::bernoulli), {node.input(0)})};
}

}  // namespace

KILN_ONNX_OP("DFT", parse_dft)
KILN_ONNX_OP("STFT", parse_stft)
KILN_ONNX_OP("HannWindow", parse_window<op::window_kind::hann>)
KILN_ONNX_OP("HammingWindow", parse_window<op::window_kind::hamming>)
KILN_ONNX_OP("BlackmanWindow", parse_window<op::window_kind::blackman>)
KILN_ONNX_OP("MelWeightMatrix", parse_mel_weight_matrix)
KILN_ONNX_OP("RandomUniform", parse_random_uniform)
KILN_ONNX_OP("RandomNormal", parse_random_normal)
KILN_ONNX_OP("RandomUniformLike", parse_random_uniform_like)
KILN_ONNX_OP("RandomNormalLike", parse_random_normal_like)
KILN_ONNX_OP("Bernoulli", parse_bernoulli)

}  // namespace kiln::onnx_frontend
