#include "ops/convert.hpp"

#include "ops/common.hpp"
#include "ops/pointwise.hpp"

#include <kiln/register_op.hpp>

namespace kiln::op {

namespace {

// dst[i] = f(src element i) over a source of any strides into a standard result.
template <class To, class From, class F>
void map_elements(const argument& in, const argument& out, F f) {
    const From* src = in.data_as<const From>();
    To* dst = out.data_as<To>();
    const auto& s = in.get_shape();
    for_each_broadcast<1>(s.lens(), {s.strides()},
                          [&](std::size_t o, const std::array<std::size_t, 1>& off) { dst[o] = f(src[off[0]]); });
}

}  // namespace

shape convert_op::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    if (!inputs[0].is_tensor()) throw_error(error_code::shape, "convert: input must be a tensor, got " + inputs[0].to_string());
    return shape(target_type, inputs[0].lens());
}

argument convert_op::compute(const shape& output, const std::vector<argument>& args) const {
    argument result(output);
    visit_list(all_types{}, args[0].get_shape().get_type(), [&](auto from_tag) {
        using From = typename decltype(from_tag)::type;
        visit_list(all_types{}, target_type, [&](auto to_tag) {
            using To = typename decltype(to_tag)::type;
            map_elements<To, From>(args[0], result, [this](const From& x) { return this->apply<To>(x); });
        });
    });
    return result;
}

int type_bits(type t) {
    switch (t) {
    case type::string: return 0;
    case type::int4:
    case type::uint4:
    case type::float4e2m1: return 4;
    case type::int2:
    case type::uint2: return 2;
    default: return static_cast<int>(type_size(t)) * 8;
    }
}

shape bitcast_op::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    if (!inputs[0].is_tensor()) throw_error(error_code::shape, "bitcast: input must be a tensor, got " + inputs[0].to_string());
    const type from = inputs[0].get_type();
    if (from == type::string || target_type == type::string)
        throw_error(error_code::type, "bitcast: strings have no fixed bit width (from " + std::string(type_name(from)) +
                                          " to " + std::string(type_name(target_type)) + ")");
    if (type_bits(from) != type_bits(target_type))
        throw_error(error_code::type, "bitcast: " + std::string(type_name(from)) + " has " +
                                          std::to_string(type_bits(from)) + " bits but " +
                                          std::string(type_name(target_type)) + " has " +
                                          std::to_string(type_bits(target_type)) + "; they must be equal");
    return shape(target_type, inputs[0].lens());
}

argument bitcast_op::compute(const shape& output, const std::vector<argument>& args) const {
    argument result(output);
    visit_list(non_string_types{}, args[0].get_shape().get_type(), [&](auto from_tag) {
        using From = typename decltype(from_tag)::type;
        visit_list(non_string_types{}, target_type, [&](auto to_tag) {
            using To = typename decltype(to_tag)::type;
            map_elements<To, From>(args[0], result, [](const From& x) { return apply<To>(x); });
        });
    });
    return result;
}

KILN_REGISTER_OP(convert_op)
KILN_REGISTER_OP(bitcast_op)

}  // namespace kiln::op
