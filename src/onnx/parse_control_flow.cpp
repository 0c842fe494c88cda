// If, Loop, Scan and SequenceMap: sub-graphs become modules; values the bodies read
// from enclosing graphs become extra inputs (subgraph::captured).
//
// Loop and Scan bodies are parsed with their carried values' initial shapes. When a
// body returns a carried value of another shape, the body is parsed again with the
// merged (wider, dynamic) shape, until the shapes settle: the static parts stay
// static, only what really changes between iterations becomes dynamic.
//
// A body that may not run is checked when it runs: an If branch, or the body of a Loop
// that may run zero times, that cannot be built for the shapes it would get (a branch
// for another sample rate whose Reshape only fits that rate's tensors) becomes a
// stand-in module of op::deferred_error values that raise the build's error if the
// branch is ever taken. A body that certainly runs (both If branches failing, a Loop
// with a constant trip count of at least 1) still fails the parse. A Loop known to run
// zero times is not kept at all: its results are its initial values and empty scans.
#include "onnx/graph_parser.hpp"
#include "onnx/onnx_node.hpp"
#include "ops/control_flow.hpp"
#include "ops/control_shapes.hpp"

#include <kiln/errors.hpp>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <optional>

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

const onnx::GraphProto& graph_attr(onnx_node& node, const std::string& attr) {
    for (auto& a : node.proto().attribute())
        if (a.name() == attr && a.has_g()) return a.g();
    node.fail(error_code::parse, "has no graph attribute '" + attr + "'");
}

// The shape graph `g` declares for its output i, if it declares a usable one.
std::optional<shape> declared_output(onnx_node& node, const onnx::GraphProto& g, std::size_t i) {
    if (i >= static_cast<std::size_t>(g.output_size())) return std::nullopt;
    const auto& o = g.output(static_cast<int>(i));
    if (!o.has_type()) return std::nullopt;
    try {
        return node.parser().shape_from_type(o.type(), o.name(), false);
    } catch (const error&) {
        return std::nullopt;
    }
}

// The module standing in for body `attr` of this node, which could not be built (`why`):
// its parameters are the body's formal inputs (`input_shapes`), and output i is a
// deferred_error of shape `known[i]` when the caller knows it (the other If branch, a
// carried value), else of the graph's declared type, else of an unknown-rank tensor.
subgraph deferred_graph(onnx_node& node, const std::string& attr, const std::vector<shape>& input_shapes,
                        const std::vector<std::optional<shape>>& known, const error& why) {
    const auto& g = graph_attr(node, attr);
    std::string base = (node.name().empty() ? node.op_type() : node.name()) + "_" + attr;
    std::string name = base;
    for (int i = 1; node.prog().has_module(name); ++i) name = base + "_" + std::to_string(i);
    subgraph out;
    out.mod = node.prog().create_module(name);
    for (int i = 0; i < g.input_size(); ++i) {
        auto k = static_cast<std::size_t>(i);
        const auto& in = g.input(i);
        shape s = k < input_shapes.size() ? input_shapes[k] : shape::make_dynamic(type::float32, {});
        if (k >= input_shapes.size() && in.has_type()) {
            try {
                s = node.parser().shape_from_type(in.type(), in.name(), false);
            } catch (const error&) {
            }
        }
        out.mod->add_parameter(in.name(), s);
        out.input_names.push_back(in.name());
    }
    const std::string message = node.describe() + ": " + attr + ": " + why.message();
    std::vector<instruction_ref> values;
    for (int i = 0; i < g.output_size(); ++i) {
        auto k = static_cast<std::size_t>(i);
        std::optional<shape> s = k < known.size() ? known[k] : std::nullopt;
        if (!s) s = declared_output(node, g, k);
        if (!s) s = shape::make_dynamic(type::float32, {});
        op::deferred_error d{message, static_cast<std::int64_t>(why.code()), *s};
        values.push_back(out.mod->add_instruction(d, {}));
        out.output_names.push_back(g.output(i).name());
    }
    out.mod->add_return(values);
    return out;
}

std::vector<instruction_ref> parse_if(onnx_node& node) {
    auto cond = node.input(0);
    // A condition known now (shape arithmetic on static shapes): only that branch exists.
    if (auto c = node.constant_input(0)) {
        if (c->get_shape().elements() != 1) node.fail(error_code::shape, "the condition must hold one value");
        return node.inline_graph(c->get_double(0) != 0.0 ? "then_branch" : "else_branch");
    }
    // Either branch may never be taken (a model with one branch per sample rate): one that
    // cannot be built for these inputs fails when it runs. Both failing is an If that can
    // never run, which is the model's error now.
    std::optional<subgraph> then_g, else_g;
    auto then_err = node.try_build([&] { then_g = node.attr_graph("then_branch"); });
    auto else_err = node.try_build([&] { else_g = node.attr_graph("else_branch"); });
    if (then_err && else_err) throw *then_err;
    auto other_outputs = [](const subgraph& g) {
        std::vector<std::optional<shape>> out;
        for (auto& s : g.mod->get_output_shapes()) out.emplace_back(s);
        return out;
    };
    if (then_err) then_g = deferred_graph(node, "then_branch", {}, other_outputs(*else_g), *then_err);
    if (else_err) else_g = deferred_graph(node, "else_branch", {}, other_outputs(*then_g), *else_err);
    if (then_g->output_names.size() != else_g->output_names.size())
        node.fail(error_code::parse, "the branches return " + std::to_string(then_g->output_names.size()) + " and " +
                                         std::to_string(else_g->output_names.size()) + " values");
    auto ins = node.add(op::if_op{then_g->captured_names, else_g->captured_names},
                        concat(concat({cond}, then_g->captured), else_g->captured), {then_g->mod, else_g->mod});
    return node.unpack(ins, then_g->output_names.size());
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
    auto carried_shapes = standard_shapes(carried);
    for (auto& s : carried_shapes) in_shapes.push_back(s);
    op::loop l;
    l.has_trip_count = has_m;
    l.has_cond = has_cond;
    l.num_carried = carried.size();
    const auto& opts = node.options();
    if (opts.limit_max_iterations) l.max_iterations = static_cast<std::int64_t>(opts.max_loop_iterations);
    std::optional<std::int64_t> trips;  // the trip count, when known now
    if (has_m)
        if (auto m = node.constant_input(0); m && m->get_shape().elements() == 1) trips = m->get_int64(0);
    std::optional<bool> first_cond;  // the initial condition, when known now
    if (has_cond)
        if (auto c = node.constant_input(1); c && c->get_shape().elements() == 1) first_cond = c->get_double(0) != 0.0;
    const bool never_runs = (trips && *trips <= 0) || (first_cond && !*first_cond) || l.max_iterations == 0;
    const bool surely_runs = !never_runs && (!has_m || trips) && (!has_cond || first_cond);

    std::optional<subgraph> parsed;
    auto err = node.try_build([&] {
        parsed = parse_until_settled(node, "body", in_shapes, 2, carried.size(), 1,
                                     [](const shape& s, std::size_t) { return s; });
    });
    if (err && surely_runs) throw *err;
    if (err) {
        // The condition and the carried values keep their kinds; scan outputs their declared types.
        std::vector<std::optional<shape>> known{shape(type::bool_)};
        for (auto& s : carried_shapes) known.emplace_back(s);
        parsed = deferred_graph(node, "body", in_shapes, known, *err);
    }
    auto& body = *parsed;
    if (body.output_names.size() < 1 + carried.size())
        node.fail(error_code::parse, "the body returns " + std::to_string(body.output_names.size()) +
                                         " values, expected the condition and " + std::to_string(carried.size()) +
                                         " carried values at least");
    if (never_runs) {
        // No iteration: the results are the initial values and empty scan outputs, and
        // the body is neither compiled nor run.
        auto outs = body.mod->get_output_shapes();
        node.discard_graph(body);
        auto results = carried;
        for (std::size_t k = 1 + carried.size(); k < outs.size(); ++k)
            results.push_back(node.add_literal(literal(argument(op::empty_scan_output(outs[k])))));
        return results;
    }
    l.body_inputs = body.input_names;
    l.captured = body.captured_names;
    // A known trip count gives the scan outputs a static length.
    if (trips && (!has_cond || (first_cond && *first_cond)) && cond_stays_true(node, body)) {
        auto n = std::max<std::int64_t>(*trips, 0);
        if (l.max_iterations >= 0) n = std::min(n, l.max_iterations);
        if (n < (std::int64_t{1} << 31)) l.static_trip_count = n;
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
