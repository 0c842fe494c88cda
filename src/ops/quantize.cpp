#include "ops/quantize.hpp"

#include "ops/common.hpp"

#include <kiln/register_op.hpp>

#include <cmath>

namespace kiln::op {

namespace {

// Which scale element each element of x uses.
struct scale_layout {
    enum class kind { tensor, axis, blocked } k = kind::tensor;
    std::size_t axis = 0;
    std::size_t block = 1;
    std::vector<std::size_t> scale_strides;

    std::size_t index(const std::vector<std::size_t>& idx) const {
        if (k == kind::tensor) return 0;
        if (k == kind::axis) return idx[axis];
        std::size_t s = 0;
        for (std::size_t d = 0; d < idx.size(); ++d) s += (d == axis ? idx[d] / block : idx[d]) * scale_strides[d];
        return s;
    }
};

scale_layout make_layout(const std::string& op_name, const shape& x, const shape& scale, std::int64_t axis,
                         std::int64_t block_size) {
    scale_layout l;
    if (scale.elements() == 1 && block_size == 0) return l;
    const auto& xl = x.lens();
    const auto& sl = scale.lens();
    l.axis = normalize_axis(axis, xl.size(), op_name);
    if (block_size < 0) throw_error(error_code::shape, op_name + ": block_size must be >= 0, got " + std::to_string(block_size));
    if (block_size == 0) {
        if (sl.size() != 1 || sl[0] != xl[l.axis])
            throw_error(error_code::shape, op_name + ": a per-axis scale must be 1-D with x.lens[" +
                                               std::to_string(l.axis) + "] = " + std::to_string(xl[l.axis]) +
                                               " elements, got " + scale.to_string() + " for x " + x.to_string());
        l.k = scale_layout::kind::axis;
        return l;
    }
    l.k = scale_layout::kind::blocked;
    l.block = static_cast<std::size_t>(block_size);
    bool ok = sl.size() == xl.size();
    for (std::size_t d = 0; ok && d < xl.size(); ++d)
        ok = d == l.axis ? sl[d] == (xl[d] + l.block - 1) / l.block : sl[d] == xl[d];
    if (!ok)
        throw_error(error_code::shape, op_name + ": a blocked scale must have x's shape " + x.to_string() +
                                           " with ceil(len / " + std::to_string(block_size) + ") along axis " +
                                           std::to_string(l.axis) + ", got " + scale.to_string());
    l.scale_strides = shape::standard_strides(sl);
    return l;
}

void check_zero_point(const std::string& op_name, const std::vector<shape>& inputs) {
    if (inputs.size() < 3) return;
    // One element each (a scalar and a [1], say) is per-tensor either way.
    if (inputs[2].elements() == 1 && inputs[1].elements() == 1) return;
    if (inputs[2].lens() != inputs[1].lens())
        throw_error(error_code::shape, op_name + ": zero point " + inputs[2].to_string() +
                                           " must have the scale's shape " + inputs[1].to_string());
}

void check_tensors(const std::string& op_name, const std::vector<shape>& inputs) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
        if (!inputs[i].is_tensor())
            throw_error(error_code::shape, op_name + ": input " + std::to_string(i) + " must be a tensor, got " +
                                               inputs[i].to_string());
}

// Calls f(x_index, scale_index) for every element of x in row-major order.
template <class F>
void for_each_scaled(const std::vector<std::size_t>& lens, const scale_layout& l, F f) {
    std::size_t n = 1;
    for (auto d : lens) n *= d;
    std::vector<std::size_t> idx(lens.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        f(i, l.index(idx));
        next_index(idx, lens);
    }
}

// x / scale rounded to the division type d (a float type).
double divide_in(type d, double x, double s) {
    switch (d) {
    case type::float64: return x / s;
    case type::float16: return static_cast<float>(half(static_cast<float>(x) / static_cast<float>(s)));
    case type::bfloat16: return static_cast<float>(bfloat16(static_cast<float>(x) / static_cast<float>(s)));
    default: return static_cast<float>(x) / static_cast<float>(s);
    }
}

// NumPy's promotion of two of the types x and the scale may have.
type division_type(type a, type b) {
    if (a == type::float64 || b == type::float64 || a == type::int32 || b == type::int32) return type::float64;
    return a == b ? a : type::float32;
}

}  // namespace

shape quantize_linear_op::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2, 3);
    check_tensors(name(), inputs);
    for (std::size_t i = 0; i < 2; ++i)
        if (!list_contains(quantize_float_types{}, inputs[i].get_type()))
            throw_error(error_code::type, name() + ": input " + std::to_string(i) + " has element type " +
                                              std::string(type_name(inputs[i].get_type())) + ", expected one of " +
                                              list_names(quantize_float_types{}));
    const type q = inputs.size() > 2 ? inputs[2].get_type() : output_type;
    if (!list_contains(quantized_types{}, q))
        throw_error(error_code::type, name() + ": cannot quantize to " + std::string(type_name(q)) +
                                          "; expected one of " + list_names(quantized_types{}));
    make_layout(name(), inputs[0], inputs[1], axis, block_size);
    check_zero_point(name(), inputs);
    return shape(q, inputs[0].lens());
}

argument quantize_linear_op::compute(const shape& output, const std::vector<argument>& args) const {
    argument result(output);
    const auto& xs = args[0].get_shape();
    auto l = make_layout(name(), xs, args[1].get_shape(), axis, block_size);
    auto x = args[0].to_vector<double>();
    auto s = args[1].to_vector<double>();
    auto z = args.size() > 2 ? args[2].to_vector<double>() : std::vector<double>(s.size(), 0.0);
    const type d = precision ? *precision : division_type(xs.get_type(), args[1].get_shape().get_type());
    visit_list(quantized_types{}, output.get_type(), [&](auto tag) {
        using Q = typename decltype(tag)::type;
        Q* dst = result.data_as<Q>();
        for_each_scaled(xs.lens(), l, [&](std::size_t i, std::size_t si) {
            dst[i] = apply<Q>(divide_in(d, x[i], s[si]), z[si]);
        });
    });
    return result;
}

shape dequantize_linear_op::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2, 3);
    check_tensors(name(), inputs);
    const type xt = inputs[0].get_type();
    if (!list_contains(dequantize_input_types{}, xt))
        throw_error(error_code::type, name() + ": cannot dequantize " + std::string(type_name(xt)) +
                                          "; expected one of " + list_names(dequantize_input_types{}));
    if (!list_contains(float_types{}, inputs[1].get_type()))
        throw_error(error_code::type, name() + ": the scale has element type " +
                                          std::string(type_name(inputs[1].get_type())) + ", expected a float type");
    if (inputs.size() > 2 && inputs[2].get_type() != xt)
        throw_error(error_code::type, name() + ": the zero point has element type " +
                                          std::string(type_name(inputs[2].get_type())) + ", expected " +
                                          std::string(type_name(xt)) + " like x");
    const type out = output_type ? *output_type : inputs[1].get_type();
    if (!list_contains(float_types{}, out))
        throw_error(error_code::type, name() + ": output type " + std::string(type_name(out)) + " is not a float type");
    make_layout(name(), inputs[0], inputs[1], axis, block_size);
    check_zero_point(name(), inputs);
    return shape(out, inputs[0].lens());
}

argument dequantize_linear_op::compute(const shape& output, const std::vector<argument>& args) const {
    argument result(output);
    const auto& xs = args[0].get_shape();
    const type xt = xs.get_type();
    auto l = make_layout(name(), xs, args[1].get_shape(), axis, block_size);
    auto x = args[0].to_vector<double>();
    auto s = args[1].to_vector<double>();
    // fp8 and fp4 data have no zero point (ONNX requires it to be 0 there).
    const bool use_zero = args.size() > 2 && !is_float(xt);
    auto z = use_zero ? args[2].to_vector<double>() : std::vector<double>(s.size(), 0.0);
    // The reference reads x as float32 first, then computes in float64 when x is int32
    // (float32 - int32 promotes) or the scale is float64.
    const bool wide = xt == type::int32 || args[1].get_shape().get_type() == type::float64;
    visit_list(float_types{}, output.get_type(), [&](auto tag) {
        using O = typename decltype(tag)::type;
        O* dst = result.data_as<O>();
        for_each_scaled(xs.lens(), l, [&](std::size_t i, std::size_t si) {
            const float xf = static_cast<float>(x[i]);
            if (wide) dst[i] = convert<O>(apply<double>(xf, z[si], s[si]));
            else dst[i] = convert<O>(apply<float>(xf, static_cast<float>(z[si]), static_cast<float>(s[si])));
        });
    });
    return result;
}

shape dynamic_quantize_linear_op::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    check_tensors(name(), inputs);
    if (!list_contains(float_types{}, inputs[0].get_type()))
        throw_error(error_code::type, name() + ": x has element type " + std::string(type_name(inputs[0].get_type())) +
                                          ", expected a float type");
    return shape::tuple({shape(type::uint8, inputs[0].lens()), shape(inputs[0].get_type()), shape(type::uint8)});
}

argument dynamic_quantize_linear_op::compute(const shape& output, const std::vector<argument>& args) const {
    const auto& subs = output.sub_shapes();
    argument y(subs[0]), scale_arg(subs[1]), zp_arg(subs[2]);
    auto x = args[0].to_vector<float>();
    // In float32, step by step, as the ONNX reference: range extended to include 0.
    float maxx = 0, minx = 0;
    for (float v : x) {
        maxx = std::fmax(maxx, v);
        minx = std::fmin(minx, v);
    }
    const float scale = (maxx == minx ? 1.0f : maxx - minx) / 255.0f;
    const float zp = std::nearbyint(std::fmin(std::fmax(0.0f - minx / scale, 0.0f), 255.0f));
    auto* dst = y.data_as<std::uint8_t>();
    for (std::size_t i = 0; i < x.size(); ++i)
        dst[i] = static_cast<std::uint8_t>(std::fmin(std::fmax(std::nearbyint(x[i] / scale) + zp, 0.0f), 255.0f));
    visit_list(float_types{}, subs[1].get_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        *scale_arg.data_as<T>() = convert<T>(scale);
    });
    *zp_arg.data_as<std::uint8_t>() = static_cast<std::uint8_t>(zp);
    return argument::make_tuple({y, scale_arg, zp_arg});
}

KILN_REGISTER_OP(quantize_linear_op)
KILN_REGISTER_OP(dequantize_linear_op)
KILN_REGISTER_OP(dynamic_quantize_linear_op)

}  // namespace kiln::op
