#include "onnx/parse_tensor_common.hpp"

#include <kiln/context.hpp>

namespace kiln::onnx_frontend {

std::optional<std::vector<std::int64_t>> constant_ints(const onnx_node& node, std::size_t i) {
    auto v = node.constant_input(i);
    if (!v) return std::nullopt;
    if (!is_integer(v->get_shape().get_type()) || v->get_shape().ndim() > 1)
        node.fail(error_code::type, "input " + std::to_string(i) + " must be a 0-D or 1-D integer tensor, got " +
                                        v->get_shape().to_string());
    return v->to_vector<std::int64_t>();
}

std::vector<instruction_ref> add_or_fold(const onnx_node& node, const operation& op, std::vector<instruction_ref> args,
                                         std::size_t outputs) {
    std::vector<argument> values;
    for (auto a : args) {
        auto v = node.constant_value(a);
        if (!v) break;
        values.push_back(*v);
    }
    if (values.size() == args.size() && !op.traits().nondeterministic) {
        std::vector<shape> shapes;
        for (auto& v : values) shapes.push_back(v.get_shape());
        host_context ctx;
        auto r = op.compute(ctx, op.compute_shape(shapes), values);
        if (!r.get_shape().is_tuple()) return {node.add_literal(literal(r))};
        std::vector<instruction_ref> out;
        for (std::size_t i = 0; i < outputs && i < r.elements().size(); ++i)
            out.push_back(node.add_literal(literal(r.elements()[i])));
        return out;
    }
    auto ins = node.add(op, std::move(args));
    if (!ins->get_shape().is_tuple()) return {ins};
    return node.unpack(ins, outputs);
}

bool is_empty_input(const onnx_node& node, std::size_t i) {
    if (!node.has_input(i)) return false;
    const auto& s = node.input(i)->get_shape();
    return s.is_tensor() && !s.dynamic() && s.elements() == 0;
}

}  // namespace kiln::onnx_frontend
