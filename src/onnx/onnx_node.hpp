// What an operator's parse function sees of one ONNX node: its inputs as IR
// instructions, typed attribute access with defaults, constant inputs, and a way to
// add instructions. Parse functions are registered per (domain, op_type):
//
//     KILN_ONNX_OP("Relu", parse_relu)
//     std::vector<instruction_ref> parse_relu(onnx_node& node) {
//         return {node.add(op::relu{}, {node.input(0)})};
//     }
#pragma once
#include <kiln/errors.hpp>
#include <kiln/literal.hpp>
#include <kiln/module.hpp>
#include <kiln/onnx.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
class AttributeProto;
class GraphProto;
}  // namespace onnx

namespace kiln::onnx_frontend {

class graph_parser;

// A sub-graph attribute turned into a module of the program. Values of enclosing
// graphs that the body reads become extra parameters of the module; `captured` holds
// the enclosing instructions to pass for them, in the order of `captured_names`.
struct subgraph {
    module_ref mod = nullptr;
    std::vector<std::string> input_names;  // the body's formal inputs (parameter names)
    std::vector<std::string> output_names;
    std::vector<std::string> captured_names;
    std::vector<instruction_ref> captured;
};

class onnx_node {
public:
    onnx_node(graph_parser& parser, const onnx::NodeProto& proto, std::vector<std::optional<instruction_ref>> inputs,
              std::int64_t opset);

    const std::string& op_type() const;
    const std::string& name() const;    // may be empty in the model; error messages then use the outputs
    const std::string& domain() const;  // "" for the default domain
    std::int64_t opset() const { return opset_; }  // version of the node's domain in this model
    const onnx_options& options() const;

    // Inputs. Optional inputs may be absent (missing or named "").
    std::size_t num_inputs() const { return inputs_.size(); }
    bool has_input(std::size_t i) const { return i < inputs_.size() && inputs_[i].has_value(); }
    instruction_ref input(std::size_t i) const;  // parse error naming the node when absent
    std::vector<instruction_ref> present_inputs() const;
    const std::string& input_name(std::size_t i) const;
    // The input's value when it can be computed from constants alone, else nullopt.
    std::optional<argument> constant_input(std::size_t i) const;
    // Same for any instruction.
    std::optional<argument> constant_value(instruction_ref ins) const;

    // Outputs the model asks for (trailing optional outputs may be missing or "").
    std::size_t num_outputs() const;
    bool has_output(std::size_t i) const;
    const std::string& output_name(std::size_t i) const;

    // Attributes. Each getter checks the attribute's type and throws a parse error
    // naming node, attribute, expected and actual type.
    bool has_attr(const std::string& name) const;
    std::int64_t attr_int(const std::string& name, std::optional<std::int64_t> fallback = std::nullopt) const;
    float attr_float(const std::string& name, std::optional<float> fallback = std::nullopt) const;
    std::string attr_string(const std::string& name, std::optional<std::string> fallback = std::nullopt) const;
    std::vector<std::int64_t> attr_ints(const std::string& name,
                                        std::optional<std::vector<std::int64_t>> fallback = std::nullopt) const;
    std::vector<float> attr_floats(const std::string& name,
                                   std::optional<std::vector<float>> fallback = std::nullopt) const;
    std::vector<std::string> attr_strings(const std::string& name,
                                          std::optional<std::vector<std::string>> fallback = std::nullopt) const;
    literal attr_tensor(const std::string& name) const;
    std::vector<literal> attr_tensors(const std::string& name) const;
    // An ONNX TypeProto attribute (e.g. SequenceEmpty's dtype is an int; this is for TYPE_PROTO).
    shape attr_type(const std::string& name) const;
    // Parses a GRAPH attribute into a new module. `input_shapes`, when given, override
    // the body's declared input shapes (control-flow ops know them from their inputs).
    subgraph attr_graph(const std::string& name, const std::vector<shape>& input_shapes = {}) const;
    // Parses a GRAPH attribute without inputs straight into the current module (an If
    // branch chosen at parse time) and returns the graph's outputs.
    std::vector<instruction_ref> inline_graph(const std::string& name) const;
    // Removes a sub-graph's module that will not be used (see graph_parser::discard_subgraph).
    void discard_graph(const subgraph& g) const;
    // Runs `build` (which parses sub-graphs of this node). When it fails with an error that
    // depends on the values it was given (shape, type or invalid_argument), returns that
    // error instead of throwing, with the parser as before the call (the half-built modules
    // removed): a control-flow body that may never run is checked when it runs, not here.
    // Other errors (a corrupt graph, an unsupported operator) propagate.
    std::optional<error> try_build(const std::function<void()>& build) const;
    std::vector<std::string> attr_names() const;

    // Building.
    module& mod() const;
    program& prog() const;
    instruction_ref add(const operation& op, std::vector<instruction_ref> args, std::vector<module_ref> mods = {}) const;
    instruction_ref add_literal(literal l) const;
    // Elements of a tuple-shaped instruction (multi-output ops).
    std::vector<instruction_ref> unpack(instruction_ref tuple, std::size_t count) const;

    // "node 'name' (Op, opset N)" for error messages.
    std::string describe() const;
    [[noreturn]] void fail(error_code code, const std::string& message) const;

    const onnx::NodeProto& proto() const { return proto_; }
    graph_parser& parser() const { return parser_; }

private:
    const onnx::AttributeProto* find_attr(const std::string& name) const;
    const onnx::AttributeProto& get_attr(const std::string& name, int expected_type) const;

    graph_parser& parser_;
    const onnx::NodeProto& proto_;
    std::vector<std::optional<instruction_ref>> inputs_;
    std::int64_t opset_;
};

using parse_fn = std::function<std::vector<instruction_ref>(onnx_node&)>;

void register_onnx_op(const std::string& domain, const std::string& op_type, parse_fn fn);
const parse_fn* find_onnx_op(const std::string& domain, const std::string& op_type);

struct onnx_op_registrar {
    onnx_op_registrar(const std::string& domain, const std::string& op_type, parse_fn fn) {
        register_onnx_op(domain, op_type, std::move(fn));
    }
};

// Registers `fn` for an operator of the default domain (use in a .cpp file).
#define KILN_ONNX_OP(OP_TYPE, FN) \
    static const ::kiln::onnx_frontend::onnx_op_registrar KILN_CONCAT(kiln_onnx_op_, __COUNTER__){"", OP_TYPE, FN};
// Same for another domain, e.g. KILN_ONNX_OP_DOMAIN("ai.onnx.ml", "LabelEncoder", fn).
#define KILN_ONNX_OP_DOMAIN(DOMAIN, OP_TYPE, FN) \
    static const ::kiln::onnx_frontend::onnx_op_registrar KILN_CONCAT(kiln_onnx_op_, __COUNTER__){DOMAIN, OP_TYPE, FN};

// ONNX TensorProto.DataType <-> kiln element type (throws unsupported for complex etc.).
type from_onnx_type(int onnx_data_type, const std::string& context);
int to_onnx_type(type t);

}  // namespace kiln::onnx_frontend
