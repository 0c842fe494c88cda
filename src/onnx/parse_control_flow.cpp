// If, Loop, Scan and SequenceMap: sub-graphs become modules; values the bodies read
// from enclosing graphs become extra inputs (subgraph::captured).
//
// Loop and Scan bodies are parsed with their carried values' initial shapes. When a
// body returns a carried value of another shape, the body is parsed again with the
// merged (wider, dynamic) shape, until the shapes settle: the static parts stay
// static, only what really changes between iterations becomes dynamic.
#include "onnx/onnx_node.hpp"
#include "ops/control_flow.hpp"
#include "ops/control_shapes.hpp"

#include <kiln/errors.hpp>

#include <algorithm>

namespace kiln::onnx_frontend {

namespace {

std::vector<instruction_ref> concat(std::vector<instruction_ref> a, const std::vector<instruction_ref>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

std::vector<shape> standard_shapes(const std::vector<instruction_ref>& ins) {
    std::vector<shape> out;
    for (auto i : ins) {
        const auto& s = i->get_shape();
        out.push_back(s.is_tensor() && !s.dynamic() ? s.as_standard() : s);
    }
    return out;
}

std::string describe_value(onnx_node& node, const std::string& attr, std::size_t i) {
    return node.describe() + ": " + attr + " carried value " + std::to_string(i);
}

// Parses body attribute `attr` until the carried inputs [first, first+count) agree
// with body outputs [out_first, out_first+count) (mapped through `to_input`).
template <class MapOut>
subgraph parse_until_settled(onnx_node& node, const std::string& attr, std::vector<shape> input_shapes,
                             std::size_t first, std::size_t count, std::size_t out_first, MapOut to_input) {
    for (int round = 0;; ++round) {
        auto g = node.attr_graph(attr, input_shapes);
        if (g.input_names.size() != input_shapes.size())
            node.fail(error_code::parse, "the " + attr + " graph has " + std::to_string(g.input_names.size()) +
                                             " inputs, expected " + std::to_string(input_shapes.size()));
        auto outs = g.mod->get_output_shapes();
        if (outs.size() < out_first + count)
            node.fail(error_code::parse, "the " + attr + " graph returns " + std::to_string(outs.size()) +
                                             " values, expected at least " + std::to_string(out_first + count));
        bool settled = true;
        auto next = input_shapes;
        for (std::size_t i = 0; i < count; ++i) {
            auto produced = to_input(outs[out_first + i], i);
            auto merged = op::merge_shapes(input_shapes[first + i], produced,
                                           describe_value(node, attr, i));
            if (merged != input_shapes[first + i]) {
                settled = false;
                next[first + i] = merged;
            }
        }
        if (settled) return g;
        if (round >= 8)
            node.fail(error_code::unsupported, "the shapes of the values the " + attr +
                                                   " carries between iterations do not settle");
        node.discard_graph(g);
        input_shapes = std::move(next);
    }
}

std::vector<instruction_ref> parse_if(onnx_node& node) {
    auto cond = node.input(0);
    // A condition known now (shape arithmetic on static shapes): only that branch exists.
    if (auto c = node.constant_input(0)) {
        if (c->get_shape().elements() != 1) node.fail(error_code::shape, "the condition must hold one value");
        return node.inline_graph(c->get_double(0) != 0.0 ? "then_branch" : "else_branch");
    }
    auto then_g = node.attr_graph("then_branch");
    auto else_g = node.attr_graph("else_branch");
    if (then_g.output_names.size() != else_g.output_names.size())
        node.fail(error_code::parse, "the branches return " + std::to_string(then_g.output_names.size()) + " and " +
                                         std::to_string(else_g.output_names.size()) + " values");
    auto ins = node.add(op::if_op{then_g.captured_names, else_g.captured_names},
                        concat(concat({cond}, then_g.captured), else_g.captured), {then_g.mod, else_g.mod});
    return node.unpack(ins, then_g.output_names.size());
}

// The body's condition output is its condition input (or constant true): the
// condition never changes, so the trip count alone decides.
bool cond_stays_true(onnx_node& node, const subgraph& g) {
    auto ret = g.mod->get_return();
    if (ret == g.mod->end() || ret->inputs().empty()) return false;
    auto c = ret->inputs()[0];
    if (c->is_param() && c->param_name() == g.input_names.at(1)) return true;
    auto v = node.constant_value(c);
    return v && v->get_shape().elements() == 1 && v->get_double(0) != 0.0;
}

std::vector<instruction_ref> parse_loop(onnx_node& node) {
    const bool has_m = node.has_input(0);
    const bool has_cond = node.has_input(1);
    std::vector<instruction_ref> carried;
    for (std::size_t i = 2; i < node.num_inputs(); ++i) {
        if (!node.has_input(i)) node.fail(error_code::parse, "loop-carried input " + std::to_string(i) + " is empty");
        carried.push_back(node.input(i));
    }
    std::vector<shape> in_shapes{shape(type::int64), shape(type::bool_)};
    for (auto& s : standard_shapes(carried)) in_shapes.push_back(s);
    auto body = parse_until_settled(node, "body", in_shapes, 2, carried.size(), 1,
                                    [](const shape& s, std::size_t) { return s; });
    op::loop l;
    l.has_trip_count = has_m;
    l.has_cond = has_cond;
    l.num_carried = carried.size();
    l.body_inputs = body.input_names;
    l.captured = body.captured_names;
    const auto& opts = node.options();
    if (opts.limit_max_iterations) l.max_iterations = static_cast<std::int64_t>(opts.max_loop_iterations);
    // A known trip count gives the scan outputs a static length.
    if (has_m) {
        auto m = node.constant_input(0);
        bool cond_true = !has_cond;
        if (has_cond) {
            auto c = node.constant_input(1);
            cond_true = c && c->get_shape().elements() == 1 && c->get_double(0) != 0.0;
        }
        if (m && m->get_shape().elements() == 1 && cond_true && cond_stays_true(node, body)) {
            auto n = std::max<std::int64_t>(m->get_int64(0), 0);
            if (l.max_iterations >= 0) n = std::min(n, l.max_iterations);
            if (n < (std::int64_t{1} << 31)) l.static_trip_count = n;
        }
    }
    std::vector<instruction_ref> args;
    if (has_m) args.push_back(node.input(0));
    if (has_cond) args.push_back(node.input(1));
    args = concat(concat(args, carried), body.captured);
    auto ins = node.add(l, args, {body.mod});
    auto n_out = body.output_names.size() - 1;
    return node.unpack(ins, n_out);
}

std::vector<instruction_ref> parse_scan(onnx_node& node) {
    op::scan s;
    s.batched = node.opset() < 9;
    const auto m = static_cast<std::size_t>(node.attr_int("num_scan_inputs"));
    std::size_t first = 0;
    std::vector<instruction_ref> args;
    if (s.batched) {
        s.has_sequence_lens = node.has_input(0);
        if (s.has_sequence_lens) args.push_back(node.input(0));
        first = 1;
        s.input_directions = node.attr_ints("directions", std::vector<std::int64_t>{});
    } else {
        s.input_axes = node.attr_ints("scan_input_axes", std::vector<std::int64_t>{});
        s.input_directions = node.attr_ints("scan_input_directions", std::vector<std::int64_t>{});
        s.output_axes = node.attr_ints("scan_output_axes", std::vector<std::int64_t>{});
        s.output_directions = node.attr_ints("scan_output_directions", std::vector<std::int64_t>{});
    }
    if (node.num_inputs() < first + m) node.fail(error_code::parse, "fewer inputs than num_scan_inputs");
    s.num_states = node.num_inputs() - first - m;
    s.num_scan_inputs = m;
    std::vector<instruction_ref> values;
    for (std::size_t i = first; i < node.num_inputs(); ++i) values.push_back(node.input(i));
    args = concat(args, values);
    auto shapes = standard_shapes(args);
    auto body_shapes = s.body_input_shapes(shapes);
    auto body = parse_until_settled(node, "body", body_shapes, 0, s.num_states, 0,
                                    [](const shape& x, std::size_t) { return x; });
    s.body_inputs = body.input_names;
    s.captured = body.captured_names;
    auto ins = node.add(s, concat(args, body.captured), {body.mod});
    return node.unpack(ins, body.output_names.size());
}

std::vector<instruction_ref> parse_sequence_map(onnx_node& node) {
    std::vector<instruction_ref> args;
    std::vector<shape> body_shapes;
    for (std::size_t i = 0; i < node.num_inputs(); ++i) {
        auto in = node.input(i);
        args.push_back(in);
        const auto& s = in->get_shape();
        shape e = s.is_sequence() ? s.sub_shapes()[0] : s;
        if (op::is_unknown_element(e)) e = shape::make_dynamic(e.get_type(), {{0, dynamic_dimension::unbounded, {}}});
        body_shapes.push_back(e);
    }
    if (args.empty() || !args[0]->get_shape().is_sequence())
        node.fail(error_code::parse, "input 0 must be a sequence");
    auto body = node.attr_graph("body", body_shapes);
    op::sequence_map sm;
    sm.num_inputs = args.size();
    sm.body_inputs = body.input_names;
    sm.captured = body.captured_names;
    auto ins = node.add(sm, concat(args, body.captured), {body.mod});
    return node.unpack(ins, body.output_names.size());
}

}  // namespace

KILN_ONNX_OP("If", parse_if)
KILN_ONNX_OP("Loop", parse_loop)
KILN_ONNX_OP("Scan", parse_scan)
KILN_ONNX_OP("SequenceMap", parse_sequence_map)

}  // namespace kiln::onnx_frontend
