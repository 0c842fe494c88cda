#include "ops/dropout.hpp"

#include "ops/common.hpp"
#include "ops/mt19937.hpp"
#include "ops/type_list.hpp"

#include <kiln/register_op.hpp>

#include <random>

namespace kiln::op {

shape dropout_op::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 3);
    for (std::size_t i = 0; i < 3; ++i)
        if (!inputs[i].is_tensor())
            throw_error(error_code::shape, "dropout: input " + std::to_string(i) + " must be a tensor, got " +
                                               inputs[i].to_string());
    if (!list_contains(float_types{}, inputs[0].get_type()))
        throw_error(error_code::type, "dropout: x has element type " + std::string(type_name(inputs[0].get_type())) +
                                          ", expected a float type");
    if (inputs[1].elements() != 1 || !is_float(inputs[1].get_type()))
        throw_error(error_code::shape, "dropout: ratio must be a float scalar, got " + inputs[1].to_string());
    if (inputs[2].elements() != 1 || inputs[2].get_type() != type::bool_)
        throw_error(error_code::shape, "dropout: training_mode must be a bool scalar, got " + inputs[2].to_string());
    return shape::tuple({inputs[0].as_standard(), shape(type::bool_, inputs[0].lens())});
}

argument dropout_op::compute(const shape& output, const std::vector<argument>& args) const {
    const auto& subs = output.sub_shapes();
    argument y(subs[0]), mask(subs[1]);
    const float ratio = static_cast<float>(args[1].get_double(0));
    const bool training = args[2].get_int64(0) != 0;
    bool* keep = mask.data_as<bool>();
    const std::size_t n = subs[0].elements();
    if (!training || ratio == 0.0f) {
        args[0].copy_to(y);
        for (std::size_t i = 0; i < n; ++i) keep[i] = true;
        return argument::make_tuple({y, mask});
    }
    if (!(ratio >= 0.0f && ratio < 1.0f))
        throw_error(error_code::runtime, "dropout: ratio must be in [0, 1), got " + std::to_string(ratio));
    const auto s = seed ? static_cast<std::uint32_t>(*seed) : static_cast<std::uint32_t>(std::random_device{}());
    mt19937_numpy gen(s);
    for (std::size_t i = 0; i < n; ++i) keep[i] = gen.next_double() >= static_cast<double>(ratio);
    visit_list(float_types{}, subs[0].get_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        using C = compute_t<T>;
        const C scale = static_cast<C>(1.0f / (1.0f - ratio));
        const auto& xs = args[0].get_shape();
        const T* x = args[0].data_as<const T>();
        T* dst = y.data_as<T>();
        for (std::size_t i = 0; i < n; ++i)
            dst[i] = convert<T>(keep[i] ? static_cast<C>(x[xs.index(i)]) * scale : C(0));
    });
    return argument::make_tuple({y, mask});
}

KILN_REGISTER_OP(dropout_op)

}  // namespace kiln::op
