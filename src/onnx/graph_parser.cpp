#include "onnx/graph_parser.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>

#include <onnx/onnx_pb.h>

#include <fstream>
#include <sstream>
#include <unordered_set>

namespace kiln::onnx_frontend {

namespace {

constexpr int newest_opset = 28;

// Stands in for an operator Kiln does not know (skip_unknown_operators): parsing
// succeeds, running it fails with the operator's name.
struct unknown_operator {
    std::string op_type;
    std::string domain;
    shape output;
    template <class Self, class F>
    static void reflect(Self& self, F f) {
        f(self.op_type, "op_type");
        f(self.domain, "domain");
        f(self.output, "output");
    }
    std::string name() const { return "onnx::unknown"; }
    op_traits traits() const { return {.side_effects = true, .handles_dynamic = true}; }
    shape compute_shape(const std::vector<shape>&) const { return output; }
    argument compute(const shape&, const std::vector<argument>&) const {
        throw_error(error_code::unsupported, "ONNX operator '" + op_type + "' (domain '" + domain +
                                                 "') is not supported; it was skipped at parse time");
    }
};
KILN_REGISTER_OP(unknown_operator)

// Nodes of a graph and of the graphs in its attributes.
std::size_t count_nodes(const onnx::GraphProto& g) {
    std::size_t n = static_cast<std::size_t>(g.node_size());
    for (auto& node : g.node())
        for (auto& a : node.attribute()) {
            if (a.has_g()) n += count_nodes(a.g());
            for (auto& sub : a.graphs()) n += count_nodes(sub);
        }
    return n;
}

// Constant folding at parse time serves shape arithmetic: results above this size,
// or chains deeper than this, stay instructions (a tiny model can describe a huge
// tensor, and folding must not allocate what the file does not hold).
constexpr std::size_t max_fold_bytes = std::size_t{16} << 20;
constexpr int max_fold_depth = 512;

std::string node_label(const onnx::NodeProto& n) {
    std::string label = n.name().empty() ? (n.output_size() > 0 ? "producing '" + n.output(0) + "'" : "(unnamed)")
                                         : "'" + n.name() + "'";
    return "node " + label + " (" + (n.domain().empty() ? "" : n.domain() + ".") + n.op_type() + ")";
}

}  // namespace

std::string normalize_domain(const std::string& domain) { return domain == "ai.onnx" ? std::string() : domain; }

graph_parser::graph_parser(program& p, const onnx_options& options, const onnx::ModelProto& model,
                           std::string model_dir)
    : prog_(p), options_(options), model_(model), model_dir_(std::move(model_dir)) {
    for (auto& o : model.opset_import()) {
        auto d = normalize_domain(o.domain());
        opsets_[d] = o.version();
    }
    if (opsets_.count("") == 0) opsets_[""] = 1;  // IR < 3 models have no opset_import
    auto v = opsets_.at("");
    if (v < 1 || v > newest_opset)
        throw_error(error_code::unsupported, "the model imports opset " + std::to_string(v) +
                                                 " of the default ONNX domain; Kiln supports opsets 1 to " +
                                                 std::to_string(newest_opset));
    for (auto& f : model.functions()) functions_[{normalize_domain(f.domain()), f.name()}] = &f;
    std::size_t total = model.has_graph() ? count_nodes(model.graph()) : 0;
    for (auto& f : model.functions()) {
        total += static_cast<std::size_t>(f.node_size());
        for (auto& node : f.node())
            for (auto& a : node.attribute()) {
                if (a.has_g()) total += count_nodes(a.g());
                for (auto& sub : a.graphs()) total += count_nodes(sub);
            }
    }
    node_budget_ = 200000 + 64 * total;
}

void graph_parser::define(scope& sc, const std::string& name, instruction_ref value, const std::string& what) {
    if (!sc.defined.insert(name).second)
        throw_error(error_code::parse, what + ": value '" + name +
                                           "' is defined more than once (an ONNX value is assigned exactly once)");
    sc.values[name] = value;
}

std::int64_t graph_parser::opset_of(const std::string& domain) const {
    auto it = opsets_.find(normalize_domain(domain));
    return it == opsets_.end() ? 1 : it->second;
}

std::string graph_parser::unique_module_name(const std::string& hint) {
    std::string base = hint.empty() ? "subgraph" : hint;
    std::string name = base;
    for (int i = 1; prog_.has_module(name); ++i) name = base + "_" + std::to_string(i);
    return name;
}

std::optional<instruction_ref> graph_parser::lookup(scope& sc, const std::string& name) {
    auto it = sc.values.find(name);
    if (it != sc.values.end()) return it->second;
    if (sc.parent == nullptr || sc.isolated) return std::nullopt;
    auto outer = lookup(*sc.parent, name);
    if (!outer) return std::nullopt;
    if (sc.mod == sc.parent->mod) return outer;  // an inlined graph shares its parent's module
    instruction_ref local;
    if ((*outer)->is_literal()) {
        local = sc.mod->insert_literal(sc.mod->begin(), (*outer)->get_literal());
    } else if (auto c = eval_constant(*outer); c && c->get_shape().is_tensor()) {
        // A value the enclosing graph computes from constants (shape arithmetic) stays a
        // constant in the body, so the body's shapes stay static.
        local = sc.mod->insert_literal(sc.mod->begin(), literal(*c));
    } else {
        local = sc.mod->insert_parameter(sc.mod->begin(), name, (*outer)->get_shape());
        sc.captured_names.push_back(name);
        sc.captured.push_back(*outer);
    }
    sc.values[name] = local;
    return local;
}

shape graph_parser::shape_from_type(const onnx::TypeProto& t, const std::string& value_name, bool graph_input) const {
    switch (t.value_case()) {
        case onnx::TypeProto::kSequenceType:
            return shape::sequence(shape_from_type(t.sequence_type().elem_type(), value_name, false));
        case onnx::TypeProto::kOptionalType:
            return shape::optional(shape_from_type(t.optional_type().elem_type(), value_name, false));
        case onnx::TypeProto::kTensorType: break;
        case onnx::TypeProto::kMapType:
            throw_error(error_code::unsupported, "value '" + value_name + "' has a map type, which Kiln does not support");
        default:
            throw_error(error_code::parse, "value '" + value_name + "' has no type");
    }
    const auto& tt = t.tensor_type();
    type et = from_onnx_type(tt.elem_type(), "value '" + value_name + "'");
    // The model's names for its dims ("batch", "past_sequence + sequence"), as symbols.
    auto symbol_of = [&](int i) -> std::string {
        if (!tt.has_shape() || i >= tt.shape().dim_size()) return {};
        const auto& d = tt.shape().dim(i);
        if (!d.has_dim_param() || d.dim_param().empty()) return {};
        return dim_expr::from_dim_param(d.dim_param()).to_string();
    };
    if (graph_input) {
        if (auto it = options_.map_dyn_input_dims.find(value_name); it != options_.map_dyn_input_dims.end()) {
            // The caller's ranges keep the model's names, so that inputs sharing a name
            // still share the dim.
            auto dims = it->second;
            for (std::size_t i = 0; i < dims.size(); ++i)
                if (dims[i].symbol.empty() && !dims[i].is_fixed()) dims[i].symbol = symbol_of(static_cast<int>(i));
            return shape::make_dynamic(et, dims);
        }
        if (auto it = options_.map_input_dims.find(value_name); it != options_.map_input_dims.end())
            return shape(et, it->second);
    }
    if (!tt.has_shape()) {
        if (graph_input)
            throw_error(error_code::shape, "input '" + value_name +
                                               "' declares no shape (not even its rank); give its dimensions with "
                                               "map_input_dims");
        // Inside sub-graphs and sequences, an unknown rank is described as rank 0
        // dynamic; the ops that consume it work from run-time shapes.
        return shape::make_dynamic(et, {});
    }
    std::vector<dynamic_dimension> dims;
    dims.reserve(static_cast<std::size_t>(tt.shape().dim_size()));
    // Symbolic/unknown dims: fixed by default_dim_value (or a fixed default range), else dynamic.
    const bool fixed_default = options_.default_dim_value.has_value() || options_.default_dyn_dim_value.is_fixed();
    const std::size_t fixed_size = options_.default_dim_value.value_or(options_.default_dyn_dim_value.min);
    for (auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
            if (d.dim_value() < 0)
                throw_error(error_code::parse, "value '" + value_name + "' has a negative dimension " +
                                                   std::to_string(d.dim_value()));
            auto n = static_cast<std::size_t>(d.dim_value());
            dims.push_back(dynamic_dimension{n, n, {}});
        } else if (!graph_input) {
            dims.push_back(dynamic_dimension{0, dynamic_dimension::unbounded, {}});
        } else if (fixed_default) {
            dims.push_back(dynamic_dimension{fixed_size, fixed_size, {}});
        } else {
            dims.push_back(options_.default_dyn_dim_value);
            dims.back().symbol = symbol_of(static_cast<int>(dims.size() - 1));
        }
    }
    try {
        return shape::make_dynamic(et, dims);
    } catch (const error& e) {
        throw_error(error_code::parse, "value '" + value_name + "': " + e.message());
    }
}

void graph_parser::parse_main() {
    if (!model_.has_graph()) throw_error(error_code::parse, "the model has no graph");
    const auto& g = model_.graph();
    module_ref m = prog_.get_main_module();
    scope sc;
    sc.mod = m;
    current_ = &sc;
    std::unordered_set<std::string> initializer_names;
    for (auto& init : g.initializer()) initializer_names.insert(init.name());
    // Graph inputs first (in order), then initializers, so parameter order follows the model.
    for (auto& in : g.input()) {
        if (in.name().empty()) throw_error(error_code::parse, "a graph input has no name");
        if (sc.defined.count(in.name())) throw_error(error_code::parse, "graph input '" + in.name() + "' is declared twice");
        if (initializer_names.count(in.name())) continue;
        define(sc, in.name(), m->add_parameter(in.name(), shape_from_type(in.type(), in.name(), true)), "graph input");
    }
    for (auto& init : g.initializer()) {
        if (init.name().empty()) throw_error(error_code::parse, "an initializer has no name");
        auto lit = load_tensor(init, "initializer '" + init.name() + "'");
        bool is_input = false;
        for (auto& in : g.input()) is_input = is_input || in.name() == init.name();
        if (sc.defined.count(init.name()))
            throw_error(error_code::parse, "initializer '" + init.name() + "' is given more than once");
        if (is_input) {
            // Old models list weights as inputs too: a parameter the caller may
            // override, defaulting to the initializer.
            define(sc, init.name(), m->add_parameter(init.name(), lit.get_shape()), "initializer");
            prog_.set_parameter_default(init.name(), lit);
        } else {
            define(sc, init.name(), m->add_literal(lit), "initializer");
        }
    }
    parse_nodes(g, sc);
    std::vector<instruction_ref> outs;
    std::vector<std::string> names;
    for (auto& o : g.output()) {
        auto v = lookup(sc, o.name());
        if (!v) throw_error(error_code::parse, "graph output '" + o.name() + "' is not produced by any node or input");
        outs.push_back(*v);
        names.push_back(o.name());
    }
    m->add_return(outs);
    prog_.set_output_names(names);
    current_ = nullptr;
}

subgraph graph_parser::parse_subgraph(const onnx::GraphProto& g, const std::string& name_hint, scope* parent,
                                      const std::vector<shape>& input_shapes) {
    subgraph out;
    out.mod = prog_.create_module(unique_module_name(name_hint));
    scope sc;
    sc.mod = out.mod;
    sc.parent = parent;
    auto* saved = current_;
    current_ = &sc;
    for (int i = 0; i < g.input_size(); ++i) {
        const auto& in = g.input(i);
        if (sc.defined.count(in.name()))
            throw_error(error_code::parse, "sub-graph input '" + in.name() + "' is declared twice");
        shape s = static_cast<std::size_t>(i) < input_shapes.size() ? input_shapes[i]
                                                                    : shape_from_type(in.type(), in.name(), false);
        define(sc, in.name(), out.mod->add_parameter(in.name(), s), "sub-graph input");
        out.input_names.push_back(in.name());
    }
    for (auto& init : g.initializer())
        define(sc, init.name(), out.mod->add_literal(load_tensor(init, "initializer '" + init.name() + "'")),
               "sub-graph initializer");
    parse_nodes(g, sc);
    std::vector<instruction_ref> outs;
    for (auto& o : g.output()) {
        auto v = lookup(sc, o.name());
        if (!v) throw_error(error_code::parse, "sub-graph output '" + o.name() + "' is not produced");
        outs.push_back(*v);
        out.output_names.push_back(o.name());
    }
    out.mod->add_return(outs);
    out.captured_names = sc.captured_names;
    out.captured = sc.captured;
    current_ = saved;
    return out;
}

std::vector<instruction_ref> graph_parser::parse_inline(const onnx::GraphProto& g, scope* parent) {
    scope sc;
    sc.mod = parent->mod;
    sc.parent = parent;
    auto* saved = current_;
    current_ = &sc;
    for (auto& init : g.initializer())
        define(sc, init.name(), sc.mod->add_literal(load_tensor(init, "initializer '" + init.name() + "'")),
               "sub-graph initializer");
    parse_nodes(g, sc);
    std::vector<instruction_ref> outs;
    for (auto& o : g.output()) {
        auto v = lookup(sc, o.name());
        if (!v) throw_error(error_code::parse, "sub-graph output '" + o.name() + "' is not produced");
        outs.push_back(*v);
    }
    current_ = saved;
    return outs;
}

void graph_parser::discard_subgraph(module_ref m) {
    std::vector<module_ref> nested;
    for (auto& ins : *m) {
        constants_.erase(&ins);
        for (auto sub : ins.module_inputs()) nested.push_back(sub);
    }
    prog_.remove_module(m->name());
    for (auto sub : nested) {
        bool used = false;
        for (auto other : prog_.get_modules())
            for (auto& ins : *other)
                for (auto x : ins.module_inputs()) used = used || x == sub;
        if (!used && prog_.has_module(sub->name())) discard_subgraph(sub);
    }
}

void graph_parser::parse_nodes(const onnx::GraphProto& g, scope& sc) {
    for (auto& node : g.node()) parse_node(node, sc, opsets_);
}

void graph_parser::parse_node(const onnx::NodeProto& node, scope& sc, const std::map<std::string, std::int64_t>& opsets) {
    if (++nodes_parsed_ > node_budget_)
        throw_error(error_code::unsupported,
                    node_label(node) + ": parsing has visited " + std::to_string(node_budget_) +
                        " nodes, far more than the model holds: its sub-graphs or functions expand too often "
                        "(nested loops whose carried shapes keep changing, or functions that call each other)");
    std::vector<std::optional<instruction_ref>> inputs;
    for (auto& name : node.input()) {
        if (name.empty()) {
            inputs.emplace_back(std::nullopt);
            continue;
        }
        auto v = lookup(sc, name);
        if (!v)
            throw_error(error_code::parse, node_label(node) + ": input '" + name +
                                               "' is not defined (not a graph input, an initializer, or the output "
                                               "of an earlier node; the graph may have a cycle)");
        inputs.emplace_back(*v);
    }
    auto domain = normalize_domain(node.domain());
    auto oit = opsets.find(domain);
    std::int64_t opset = oit == opsets.end() ? 1 : oit->second;
    auto* saved = current_;
    current_ = &sc;
    std::vector<instruction_ref> outputs;
    const parse_fn* fn = find_onnx_op(domain, node.op_type());
    try {
        if (fn) {
            onnx_node n(*this, node, inputs, opset);
            outputs = (*fn)(n);
        } else if (auto f = functions_.find({domain, node.op_type()}); f != functions_.end()) {
            inline_function(*f->second, node, sc, inputs);
            current_ = saved;
            return;
        } else if (options_.skip_unknown_operators) {
            std::vector<instruction_ref> args;
            for (auto& i : inputs)
                if (i) args.push_back(*i);
            for (int k = 0; k < node.output_size(); ++k) {
                shape s = shape::make_dynamic(type::float32, {});
                outputs.push_back(sc.mod->add_instruction(unknown_operator{node.op_type(), domain, s}, args));
            }
        } else {
            throw_error(error_code::unsupported,
                        "ONNX operator '" + node.op_type() + "' (domain '" + (domain.empty() ? "ai.onnx" : domain) +
                            "', opset " + std::to_string(opset) + ") in " + node_label(node) + " is not supported");
        }
    } catch (const error& e) {
        current_ = saved;
        std::string msg = e.message();
        if (msg.find(node_label(node)) == std::string::npos) msg = node_label(node) + ": " + msg;
        throw error(e.code(), msg);
    }
    current_ = saved;
    for (int k = 0; k < node.output_size(); ++k) {
        const auto& name = node.output(k);
        if (name.empty()) continue;
        if (static_cast<std::size_t>(k) >= outputs.size())
            throw_error(error_code::unsupported, node_label(node) + ": output " + std::to_string(k) + " ('" + name +
                                                     "') is not supported by Kiln's " + node.op_type());
        define(sc, name, outputs[k], node_label(node) + ": output");
    }
}

void graph_parser::inline_function(const onnx::FunctionProto& f, const onnx::NodeProto& call, scope& sc,
                                   const std::vector<std::optional<instruction_ref>>& inputs) {
    if (++function_depth_ > 32)
        throw_error(error_code::parse, "model-local functions nest more than 32 deep (recursive function?)");
    scope body;
    body.mod = sc.mod;
    body.isolated = true;
    for (int i = 0; i < f.input_size(); ++i)
        if (static_cast<std::size_t>(i) < inputs.size() && inputs[i])
            define(body, f.input(i), *inputs[i], "function " + f.name() + " input");
    std::map<std::string, std::int64_t> opsets = opsets_;
    for (auto& o : f.opset_import()) opsets[normalize_domain(o.domain())] = o.version();
    for (auto& n : f.node()) {
        // Resolve attribute references (ref_attr_name) against the call's attributes.
        onnx::NodeProto copy = n;
        copy.clear_attribute();
        for (auto& a : n.attribute()) {
            if (a.ref_attr_name().empty()) {
                *copy.add_attribute() = a;
                continue;
            }
            for (auto& ca : call.attribute())
                if (ca.name() == a.ref_attr_name()) {
                    auto* na = copy.add_attribute();
                    *na = ca;
                    na->set_name(a.name());
                }
        }
        parse_node(copy, body, opsets);
    }
    for (int k = 0; k < f.output_size() && k < call.output_size(); ++k) {
        if (call.output(k).empty()) continue;
        auto it = body.values.find(f.output(k));
        if (it == body.values.end())
            throw_error(error_code::parse, "function " + f.name() + " does not produce its output '" + f.output(k) + "'");
        define(sc, call.output(k), it->second, node_label(call) + ": output");
    }
    --function_depth_;
}

std::optional<argument> graph_parser::eval_constant(instruction_ref ins) { return eval_constant_at(ins, 0); }

std::optional<argument> graph_parser::eval_constant_at(instruction_ref ins, int depth) {
    if (ins->is_literal()) return ins->get_literal().get_argument();
    if (ins->is_param() || ins->is_return()) return std::nullopt;
    if (auto it = constants_.find(&*ins); it != constants_.end()) return it->second;
    const auto& op = ins->get_operator();
    if (op.traits().nondeterministic || op.traits().side_effects || !ins->module_inputs().empty() || !op.has_compute())
        return std::nullopt;
    if (depth > max_fold_depth) return std::nullopt;
    const auto& declared = ins->get_shape();
    if (!declared.dynamic() && declared.bytes() > max_fold_bytes) return std::nullopt;
    std::vector<argument> args;
    for (auto in : ins->inputs()) {
        auto v = eval_constant_at(in, depth + 1);
        if (!v) return std::nullopt;
        args.push_back(*v);
    }
    host_context ctx;
    shape s = ins->get_shape();
    if (s.dynamic()) {
        std::vector<shape> shapes;
        for (auto& a : args) shapes.push_back(a.get_shape());
        s = op.compute_shape(shapes);
        if (!s.dynamic() && s.bytes() > max_fold_bytes) return std::nullopt;
    }
    auto r = op.compute(ctx, s, args);
    constants_.emplace(&*ins, r);
    return r;
}

}  // namespace kiln::onnx_frontend
