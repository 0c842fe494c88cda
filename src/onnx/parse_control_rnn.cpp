// RNN, GRU and LSTM.
#include "onnx/onnx_node.hpp"
#include "ops/control_rnn.hpp"

#include <kiln/errors.hpp>

namespace kiln::onnx_frontend {

namespace {

template <class Op>
std::vector<instruction_ref> parse_recurrent(onnx_node& node, op::rnn_kind kind) {
    Op r;
    std::vector<instruction_ref> args{node.input(0), node.input(1), node.input(2)};
    auto optional_input = [&](std::size_t i, bool& flag) {
        flag = node.has_input(i);
        if (flag) args.push_back(node.input(i));
    };
    optional_input(3, r.has_bias);
    optional_input(4, r.has_sequence_lens);
    optional_input(5, r.has_initial_h);
    if (kind == op::rnn_kind::lstm) {
        optional_input(6, r.has_initial_c);
        optional_input(7, r.has_peephole);
    }
    auto dir = node.attr_string("direction", "forward");
    if (dir == "forward") r.direction = 0;
    else if (dir == "reverse") r.direction = 1;
    else if (dir == "bidirectional") r.direction = 2;
    else node.fail(error_code::parse, "unknown direction '" + dir + "'");
    if (node.has_attr("hidden_size")) {
        auto hs = node.attr_int("hidden_size");
        if (hs <= 0) node.fail(error_code::parse, "hidden_size must be positive");
        r.hidden_size = static_cast<std::size_t>(hs);
    } else {
        const auto& rs = node.input(2)->get_shape();
        if (rs.dynamic() || rs.ndim() != 3) node.fail(error_code::parse, "hidden_size is missing and R's shape unknown");
        r.hidden_size = rs.lens()[2];
    }
    r.activations = node.attr_strings("activations", std::vector<std::string>{});
    r.activation_alpha = node.attr_floats("activation_alpha", std::vector<float>{});
    r.activation_beta = node.attr_floats("activation_beta", std::vector<float>{});
    if (node.has_attr("clip")) {
        r.clip = node.attr_float("clip");
        if (r.clip <= 0) node.fail(error_code::parse, "clip must be positive");
    }
    r.layout = node.attr_int("layout", 0);
    r.linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;
    r.input_forget = node.attr_int("input_forget", 0) != 0;
    auto ins = node.add(r, args);
    return node.unpack(ins, kind == op::rnn_kind::lstm ? 3 : 2);
}

std::vector<instruction_ref> parse_rnn(onnx_node& node) { return parse_recurrent<op::rnn>(node, op::rnn_kind::rnn); }
std::vector<instruction_ref> parse_gru(onnx_node& node) { return parse_recurrent<op::gru>(node, op::rnn_kind::gru); }
std::vector<instruction_ref> parse_lstm(onnx_node& node) { return parse_recurrent<op::lstm>(node, op::rnn_kind::lstm); }

}  // namespace

KILN_ONNX_OP("RNN", parse_rnn)
KILN_ONNX_OP("GRU", parse_gru)
KILN_ONNX_OP("LSTM", parse_lstm)

}  // namespace kiln::onnx_frontend
