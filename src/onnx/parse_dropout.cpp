// Dropout -> the input itself at inference, or dropout_op (src/ops/dropout.hpp).
#include "onnx/onnx_node.hpp"
#include "ops/convert.hpp"
#include "ops/dropout.hpp"

namespace kiln::onnx_frontend {

namespace {

// Opsets 1-11: ratio is an attribute and the op is an identity at inference (ONNX
// runtimes ignore the old is_test flag). Opset 12+: ratio and training_mode are inputs;
// training mode draws a mask, with NumPy's generator when `seed` is set.
std::vector<instruction_ref> parse_dropout(onnx_node& node) {
    auto x = node.input(0);
    const type t = x->get_shape().get_type();
    instruction_ref ratio, training;
    bool inference = true;
    if (node.opset() >= 12) {
        ratio = node.has_input(1) ? node.input(1)
                                  : node.add_literal(literal(shape(type::float32), std::vector<float>{0.5f}));
        if (node.has_input(2)) {
            auto c = node.constant_input(2);
            inference = c && c->get_int64(0) == 0;
            training = node.input(2);
        }
        // Training mode with ratio 0 keeps every element unscaled: the identity too.
        // PyTorch exports Swin's attention dropout that way (training=True, p=0).
        if (node.has_input(1)) {
            auto r = node.constant_input(1);
            if (r && r->get_shape().elements() == 1 && r->get_double(0) == 0.0) inference = true;
        }
    } else {
        ratio = node.add_literal(literal(shape(type::float32), std::vector<float>{node.attr_float("ratio", 0.5f)}));
    }
    const bool want_mask = node.has_output(1);
    if (inference && !want_mask) return {x};
    if (inference) training = node.add_literal(literal(shape(type::bool_), std::vector<bool>{false}));
    op::dropout_op d;
    if (node.has_attr("seed")) d.seed = node.attr_int("seed");
    auto outs = node.unpack(node.add(d, {x, ratio, training}), 2);
    if (inference) outs[0] = x;
    // Dropout 7 to 9 gave the mask x's type; 10+ bool.
    if (want_mask && node.opset() < 10 && t != type::bool_) {
        op::convert_op c;
        c.target_type = t;
        outs[1] = node.add(c, {outs[1]});
    }
    return outs;
}

}  // namespace

KILN_ONNX_OP("Dropout", parse_dropout)

}  // namespace kiln::onnx_frontend
