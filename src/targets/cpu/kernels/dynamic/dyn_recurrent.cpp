#include "targets/cpu/kernels/dynamic/dyn_recurrent.hpp"

#include "targets/cpu/kernels/onednn/op_rnn.hpp"

#include <kiln/errors.hpp>
#include <kiln/register_op.hpp>

namespace kiln::cpu {

namespace {

// The template's D * H (directions times hidden size).
std::size_t features(const operation& cell) {
    if (const auto* g = cell.any_cast<gru>()) return g->directions() * g->hidden_size;
    if (const auto* r = cell.any_cast<vanilla_rnn>()) return r->directions() * r->hidden_size;
    throw_error(error_code::shape, "cpu::dyn_recurrent: its cell must be a cpu::gru or cpu::rnn, got " + cell.name());
}

}  // namespace

shape dyn_recurrent::compute_shape(const std::vector<shape>& inputs) const {
    const auto f = features(cell);
    if (inputs.size() < 4 || !inputs[0].is_tensor() || inputs[0].ndim() != 3 || inputs[0].get_type() != type::float32)
        throw_error(error_code::shape, name() + ": expected x float32 [T, N, I] and the weights, got " +
                                           std::to_string(inputs.size()) + " operands");
    const auto& x = inputs[0];
    if (!x.dynamic()) return shape(type::float32, {x.lens()[0], x.lens()[1], f});
    const auto& d = x.dyn_dims();
    return shape::make_dynamic(type::float32, {d[0], d[1], dynamic_dimension{f, f, {}}});
}

std::size_t dyn_recurrent::cached_shapes() const {
    return cache->size();
}

argument dyn_recurrent::compute(context& ctx, const shape& out, const std::vector<argument>& args) const {
    std::vector<shape> shapes;
    for (const auto& a : args) shapes.push_back(a.get_shape());
    // The weights are constants: x and h0 decide the cell.
    std::string key;
    append_shape_key(key, shapes[0]);
    if (shapes.size() > 4) append_shape_key(key, shapes[4]);
    const shape result = out.dynamic() ? compute_shape(shapes) : out.as_standard();
    auto y = argument::for_overwrite(result);
    if (result.elements() == 0) return y;
    shapes.push_back(result);
    auto e = cache->find(key);
    if (!e) {
        // A new shape: the template finalized for it. Its weights come as arguments.
        auto made = std::make_shared<dyn_recurrent_entry>();
        made->key = key;
        made->op = cell;
        std::vector<argument> constants(args.begin(), args.end());
        constants.front() = argument();  // x is no constant
        if (constants.size() > 4) constants[4] = argument();  // nor h0
        constants.emplace_back();
        made->op.finalize(ctx, result, shapes, constants);
        e = made;
        cache->add(e, max_cached);
    }
    std::vector<argument> with_out(args.begin(), args.end());
    with_out.push_back(y);
    e->op.compute(ctx, result, with_out);
    return y;
}

KILN_REGISTER_OP(dyn_recurrent)

}  // namespace kiln::cpu
