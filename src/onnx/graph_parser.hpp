// Turns ONNX graphs into modules: scopes of named values (sub-graphs may read their
// enclosing graphs' values), node dispatch to the registered parse functions,
// model-local function inlining, and constant evaluation for parse functions.
#pragma once
#include "onnx/onnx_node.hpp"

#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

namespace onnx {
class ModelProto;
class TensorProto;
class TypeProto;
class FunctionProto;
}  // namespace onnx

namespace kiln::onnx_frontend {

struct scope {
    module_ref mod = nullptr;
    scope* parent = nullptr;
    std::unordered_map<std::string, instruction_ref> values;
    std::vector<std::string> captured_names;
    std::vector<instruction_ref> captured;
    // Function bodies see only their own values.
    bool isolated = false;
    // Names this scope itself defines (inputs, initializers, node outputs): ONNX
    // values are assigned once, so a second definition is a corrupt graph.
    std::unordered_set<std::string> defined;
};

class graph_parser {
public:
    graph_parser(program& p, const onnx_options& options, const onnx::ModelProto& model, std::string model_dir);

    void parse_main();
    // Parses `g` into a fresh module; `input_shapes` override declared input shapes.
    subgraph parse_subgraph(const onnx::GraphProto& g, const std::string& name_hint, scope* parent,
                            const std::vector<shape>& input_shapes);

    // Parses the nodes of `g` (a graph without inputs) into the parent scope's module
    // and returns its outputs: an If branch chosen at parse time. Its values stay
    // local to it; it reads the parent's values directly.
    std::vector<instruction_ref> parse_inline(const onnx::GraphProto& g, scope* parent);
    // Removes a module made by parse_subgraph that is not used after all (a loop body
    // parsed again with wider input shapes), and the sub-modules only it used.
    void discard_subgraph(module_ref m);

    literal load_tensor(const onnx::TensorProto& t, const std::string& what) const;
    // The shape a graph value of this type gets; `input_name` selects option overrides.
    shape shape_from_type(const onnx::TypeProto& t, const std::string& value_name, bool graph_input) const;

    std::optional<argument> eval_constant(instruction_ref ins);

    program& prog() { return prog_; }
    const onnx_options& options() const { return options_; }
    scope* current_scope() { return current_; }
    std::int64_t opset_of(const std::string& domain) const;

private:
    void parse_nodes(const onnx::GraphProto& g, scope& sc);
    void define(scope& sc, const std::string& name, instruction_ref value, const std::string& what);
    std::optional<argument> eval_constant_at(instruction_ref ins, int depth);
    void parse_node(const onnx::NodeProto& node, scope& sc, const std::map<std::string, std::int64_t>& opsets);
    void inline_function(const onnx::FunctionProto& f, const onnx::NodeProto& call, scope& sc,
                         const std::vector<std::optional<instruction_ref>>& inputs);
    std::optional<instruction_ref> lookup(scope& sc, const std::string& name);
    std::string unique_module_name(const std::string& hint);

    program& prog_;
    onnx_options options_;
    const onnx::ModelProto& model_;
    std::string model_dir_;
    std::map<std::string, std::int64_t> opsets_;
    std::map<std::pair<std::string, std::string>, const onnx::FunctionProto*> functions_;
    std::unordered_map<const instruction*, argument> constants_;
    scope* current_ = nullptr;
    int function_depth_ = 0;
    // Sub-graphs may be parsed more than once (loop bodies until their shapes settle,
    // functions at each call): the nodes parsed in all are capped at a multiple of the
    // model's own node count, so nesting cannot make parsing take exponential time.
    std::size_t nodes_parsed_ = 0;
    std::size_t node_budget_ = 0;
    friend class onnx_node;
};

// Normalizes "ai.onnx" to "".
std::string normalize_domain(const std::string& domain);

}  // namespace kiln::onnx_frontend
