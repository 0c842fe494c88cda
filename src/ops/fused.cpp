#include "ops/fused.hpp"

#include <kiln/context.hpp>
#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

namespace kiln::op {

namespace {

[[noreturn]] void bad_body(std::size_t node, const std::string& why) {
    throw_error(error_code::shape, "fused: node " + std::to_string(node) + " " + why);
}

// Checks node k's argument positions and returns them resolved against `inputs` / `nodes`.
template <class T>
std::vector<T> node_args(const fused_node& n, std::size_t k, const std::vector<T>& inputs, const std::vector<T>& nodes) {
    std::vector<T> out;
    out.reserve(n.args.size());
    for (auto a : n.args) {
        if (a >= 0) {
            if (static_cast<std::size_t>(a) >= k)
                bad_body(k, "uses node " + std::to_string(a) + ", which does not come before it");
            out.push_back(nodes[static_cast<std::size_t>(a)]);
        } else {
            auto i = fused_arg_input(a);
            if (i >= inputs.size())
                bad_body(k, "uses input " + std::to_string(i) + " of " + std::to_string(inputs.size()));
            out.push_back(inputs[i]);
        }
    }
    return out;
}

}  // namespace

std::vector<shape> fused::node_shapes(const std::vector<shape>& inputs) const {
    if (nodes.empty()) throw_error(error_code::shape, "fused: the body has no nodes");
    std::vector<shape> shapes;
    shapes.reserve(nodes.size());
    for (std::size_t k = 0; k < nodes.size(); ++k) {
        const auto& n = nodes[k];
        if (n.op.name() == "fused") bad_body(k, "is itself fused");
        try {
            shapes.push_back(n.op.compute_shape(node_args(n, k, inputs, shapes)));
        } catch (const error& e) {
            throw error(e.code(), "fused: node " + std::to_string(k) + " (" + n.op.name() + "): " + e.message());
        }
        if (!shapes.back().is_tensor() || shapes.back().dynamic())
            bad_body(k, "(" + n.op.name() + ") gives " + shapes.back().to_string() + ", expected a static tensor");
    }
    return shapes;
}

shape fused::compute_shape(const std::vector<shape>& inputs) const {
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].is_tensor() || inputs[i].dynamic())
            throw_error(error_code::shape, "fused: input " + std::to_string(i) + " must be a static tensor, got " +
                                               inputs[i].to_string());
    return node_shapes(inputs).back().as_standard();
}

argument fused::compute(context& ctx, const shape& output, const std::vector<argument>& args) const {
    std::vector<shape> in_shapes;
    in_shapes.reserve(args.size());
    for (const auto& a : args) in_shapes.push_back(a.get_shape());
    const auto shapes = node_shapes(in_shapes);
    std::vector<argument> values;
    values.reserve(nodes.size());
    for (std::size_t k = 0; k < nodes.size(); ++k)
        values.push_back(nodes[k].op.compute(ctx, shapes[k], node_args(nodes[k], k, args, values)));
    const auto& r = values.back();
    if (r.get_shape() == output) return r;
    argument out(output);
    r.copy_to(out);
    return out;
}

shape fused_literal::compute_shape(const std::vector<shape>& inputs) const {
    if (!inputs.empty())
        throw_error(error_code::shape, "fused_literal: takes no inputs, got " + std::to_string(inputs.size()));
    return value.get_shape();
}

KILN_REGISTER_OP(fused)
KILN_REGISTER_OP(fused_literal)

}  // namespace kiln::op
