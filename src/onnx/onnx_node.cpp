#include "onnx/graph_parser.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/errors.hpp>

#include <onnx/onnx_pb.h>

#include <map>
#include <mutex>
#include <unordered_set>

namespace kiln::onnx_frontend {

namespace {
std::string_view attr_type_name(int t) {
    switch (t) {
        case onnx::AttributeProto::FLOAT: return "float";
        case onnx::AttributeProto::INT: return "int";
        case onnx::AttributeProto::STRING: return "string";
        case onnx::AttributeProto::TENSOR: return "tensor";
        case onnx::AttributeProto::GRAPH: return "graph";
        case onnx::AttributeProto::FLOATS: return "floats";
        case onnx::AttributeProto::INTS: return "ints";
        case onnx::AttributeProto::STRINGS: return "strings";
        case onnx::AttributeProto::TENSORS: return "tensors";
        case onnx::AttributeProto::GRAPHS: return "graphs";
        case onnx::AttributeProto::SPARSE_TENSOR: return "sparse tensor";
        case onnx::AttributeProto::TYPE_PROTO: return "type";
        default: return "undefined";
    }
}

std::map<std::pair<std::string, std::string>, parse_fn>& op_table() {
    static std::map<std::pair<std::string, std::string>, parse_fn> t;
    return t;
}
std::mutex& op_table_mutex() {
    static std::mutex m;
    return m;
}
}  // namespace

void register_onnx_op(const std::string& domain, const std::string& op_type, parse_fn fn) {
    std::lock_guard<std::mutex> lock(op_table_mutex());
    op_table()[{normalize_domain(domain), op_type}] = std::move(fn);
}

const parse_fn* find_onnx_op(const std::string& domain, const std::string& op_type) {
    std::lock_guard<std::mutex> lock(op_table_mutex());
    auto it = op_table().find({normalize_domain(domain), op_type});
    return it == op_table().end() ? nullptr : &it->second;
}

}  // namespace kiln::onnx_frontend

namespace kiln {
std::vector<std::string> get_onnx_operators() {
    std::lock_guard<std::mutex> lock(onnx_frontend::op_table_mutex());
    std::vector<std::string> names;
    for (auto& [key, fn] : onnx_frontend::op_table())
        names.push_back(key.first.empty() ? key.second : key.first + "." + key.second);
    return names;
}
}  // namespace kiln

namespace kiln::onnx_frontend {

onnx_node::onnx_node(graph_parser& parser, const onnx::NodeProto& proto,
                     std::vector<std::optional<instruction_ref>> inputs, std::int64_t opset)
    : parser_(parser), proto_(proto), inputs_(std::move(inputs)), opset_(opset) {}

const std::string& onnx_node::op_type() const { return proto_.op_type(); }
const std::string& onnx_node::name() const { return proto_.name(); }
const std::string& onnx_node::domain() const {
    static const std::string empty;
    return proto_.domain() == "ai.onnx" ? empty : proto_.domain();
}
const onnx_options& onnx_node::options() const { return parser_.options(); }

std::string onnx_node::describe() const {
    std::string label = name().empty() ? (proto_.output_size() > 0 ? "producing '" + proto_.output(0) + "'" : "(unnamed)")
                                       : "'" + name() + "'";
    return "node " + label + " (" + (domain().empty() ? "" : domain() + ".") + op_type() + ")";
}

void onnx_node::fail(error_code code, const std::string& message) const {
    throw_error(code, describe() + ": " + message);
}

instruction_ref onnx_node::input(std::size_t i) const {
    if (!has_input(i))
        fail(error_code::parse, "input " + std::to_string(i) + " is required but " +
                                    (i < inputs_.size() ? "empty" : "missing (the node has " +
                                                                        std::to_string(inputs_.size()) + " inputs)"));
    return *inputs_[i];
}

std::vector<instruction_ref> onnx_node::present_inputs() const {
    std::vector<instruction_ref> out;
    for (auto& i : inputs_)
        if (i) out.push_back(*i);
    return out;
}

const std::string& onnx_node::input_name(std::size_t i) const {
    static const std::string empty;
    return static_cast<int>(i) < proto_.input_size() ? proto_.input(static_cast<int>(i)) : empty;
}

std::optional<argument> onnx_node::constant_input(std::size_t i) const {
    if (!has_input(i)) return std::nullopt;
    return parser_.eval_constant(*inputs_[i]);
}

std::optional<argument> onnx_node::constant_value(instruction_ref ins) const { return parser_.eval_constant(ins); }

std::size_t onnx_node::num_outputs() const { return static_cast<std::size_t>(proto_.output_size()); }
bool onnx_node::has_output(std::size_t i) const { return i < num_outputs() && !proto_.output(static_cast<int>(i)).empty(); }
const std::string& onnx_node::output_name(std::size_t i) const {
    static const std::string empty;
    return i < num_outputs() ? proto_.output(static_cast<int>(i)) : empty;
}

const onnx::AttributeProto* onnx_node::find_attr(const std::string& n) const {
    for (auto& a : proto_.attribute())
        if (a.name() == n) return &a;
    return nullptr;
}

bool onnx_node::has_attr(const std::string& n) const { return find_attr(n) != nullptr; }

std::vector<std::string> onnx_node::attr_names() const {
    std::vector<std::string> names;
    for (auto& a : proto_.attribute()) names.push_back(a.name());
    return names;
}

const onnx::AttributeProto& onnx_node::get_attr(const std::string& n, int expected) const {
    const auto* a = find_attr(n);
    if (a == nullptr) fail(error_code::parse, "attribute '" + n + "' is required");
    // Old models omit `type`; infer it from which field is set.
    int t = a->type();
    if (t == onnx::AttributeProto::UNDEFINED) {
        if (a->has_f()) t = onnx::AttributeProto::FLOAT;
        else if (a->has_i()) t = onnx::AttributeProto::INT;
        else if (a->has_s()) t = onnx::AttributeProto::STRING;
        else if (a->has_t()) t = onnx::AttributeProto::TENSOR;
        else if (a->has_g()) t = onnx::AttributeProto::GRAPH;
        else if (a->floats_size() > 0) t = onnx::AttributeProto::FLOATS;
        else if (a->ints_size() > 0) t = onnx::AttributeProto::INTS;
        else if (a->strings_size() > 0) t = onnx::AttributeProto::STRINGS;
        else t = expected;  // an empty list
    }
    if (t != expected)
        fail(error_code::parse, "attribute '" + n + "' should be of type " + std::string(attr_type_name(expected)) +
                                    ", but is " + std::string(attr_type_name(t)));
    return *a;
}

std::int64_t onnx_node::attr_int(const std::string& n, std::optional<std::int64_t> fallback) const {
    if (fallback && !has_attr(n)) return *fallback;
    return get_attr(n, onnx::AttributeProto::INT).i();
}

float onnx_node::attr_float(const std::string& n, std::optional<float> fallback) const {
    if (fallback && !has_attr(n)) return *fallback;
    return get_attr(n, onnx::AttributeProto::FLOAT).f();
}

std::string onnx_node::attr_string(const std::string& n, std::optional<std::string> fallback) const {
    if (fallback && !has_attr(n)) return *fallback;
    return get_attr(n, onnx::AttributeProto::STRING).s();
}

std::vector<std::int64_t> onnx_node::attr_ints(const std::string& n,
                                               std::optional<std::vector<std::int64_t>> fallback) const {
    if (fallback && !has_attr(n)) return *fallback;
    const auto& a = get_attr(n, onnx::AttributeProto::INTS);
    return {a.ints().begin(), a.ints().end()};
}

std::vector<float> onnx_node::attr_floats(const std::string& n, std::optional<std::vector<float>> fallback) const {
    if (fallback && !has_attr(n)) return *fallback;
    const auto& a = get_attr(n, onnx::AttributeProto::FLOATS);
    return {a.floats().begin(), a.floats().end()};
}

std::vector<std::string> onnx_node::attr_strings(const std::string& n,
                                                 std::optional<std::vector<std::string>> fallback) const {
    if (fallback && !has_attr(n)) return *fallback;
    const auto& a = get_attr(n, onnx::AttributeProto::STRINGS);
    return {a.strings().begin(), a.strings().end()};
}

literal onnx_node::attr_tensor(const std::string& n) const {
    const auto& a = get_attr(n, onnx::AttributeProto::TENSOR);
    return parser_.load_tensor(a.t(), describe() + " attribute '" + n + "'");
}

std::vector<literal> onnx_node::attr_tensors(const std::string& n) const {
    const auto& a = get_attr(n, onnx::AttributeProto::TENSORS);
    std::vector<literal> out;
    for (auto& t : a.tensors()) out.push_back(parser_.load_tensor(t, describe() + " attribute '" + n + "'"));
    return out;
}

shape onnx_node::attr_type(const std::string& n) const {
    const auto& a = get_attr(n, onnx::AttributeProto::TYPE_PROTO);
    return parser_.shape_from_type(a.tp(), describe() + " attribute '" + n + "'", false);
}

subgraph onnx_node::attr_graph(const std::string& n, const std::vector<shape>& input_shapes) const {
    const auto& a = get_attr(n, onnx::AttributeProto::GRAPH);
    std::string hint = (name().empty() ? op_type() : name()) + "_" + n;
    return parser_.parse_subgraph(a.g(), hint, parser_.current_scope(), input_shapes);
}

std::vector<instruction_ref> onnx_node::inline_graph(const std::string& n) const {
    const auto& a = get_attr(n, onnx::AttributeProto::GRAPH);
    return parser_.parse_inline(a.g(), parser_.current_scope());
}

void onnx_node::discard_graph(const subgraph& g) const { parser_.discard_subgraph(g.mod); }

std::optional<error> onnx_node::try_build(const std::function<void()>& build) const {
    auto* saved = parser_.current_;
    std::unordered_set<const module*> before;
    for (auto m : parser_.prog().get_modules()) before.insert(m);
    try {
        build();
        return std::nullopt;
    } catch (const error& e) {
        if (e.code() != error_code::shape && e.code() != error_code::type && e.code() != error_code::invalid_argument)
            throw;
        // parse_subgraph leaves its scope current and its module in the program when a
        // node inside fails: undo both, removing the modules made since (nested bodies
        // included) once nothing refers to them.
        parser_.current_ = saved;
        for (bool removed = true; removed;) {
            removed = false;
            auto mods = parser_.prog().get_modules();
            for (auto m : mods) {
                if (before.count(m)) continue;
                bool used = false;
                for (auto other : mods)
                    for (auto& ins : *other)
                        for (auto sub : ins.module_inputs()) used = used || sub == m;
                if (used) continue;
                parser_.discard_subgraph(m);
                removed = true;
                break;
            }
        }
        return e;
    }
}

module& onnx_node::mod() const { return *parser_.current_scope()->mod; }
program& onnx_node::prog() const { return parser_.prog(); }

instruction_ref onnx_node::add(const operation& op, std::vector<instruction_ref> args, std::vector<module_ref> mods) const {
    return mod().add_instruction(op, std::move(args), std::move(mods));
}

instruction_ref onnx_node::add_literal(literal l) const { return mod().add_literal(std::move(l)); }

std::vector<instruction_ref> onnx_node::unpack(instruction_ref tuple, std::size_t count) const {
    std::vector<instruction_ref> out;
    for (std::size_t i = 0; i < count; ++i) out.push_back(add(builtin::get_tuple_elem{i}, {tuple}));
    return out;
}

}  // namespace kiln::onnx_frontend
