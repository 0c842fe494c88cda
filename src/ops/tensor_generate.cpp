#include "ops/tensor_generate.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::op {

// ---- constant_of_shape

shape constant_of_shape::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    if (in[0].get_type() != type::int64)
        throw_error(error_code::type, name() + ": the shape input must be int64, got " + in[0].to_string());
    if (value.get_shape().elements() != 1)
        throw_error(error_code::shape, name() + ": value must hold one element, got " + value.get_shape().to_string());
    return unknown_dims(value.get_shape().get_type(), static_length(in[0], name(), "the shape input"));
}

namespace {
// The output dims ConstantOfShape's shape input holds.
std::vector<std::size_t> lens_from(const argument& dims, const std::string& op_name) {
    std::vector<std::size_t> lens;
    for (auto d : read_ints(dims, op_name, "shape")) {
        if (d < 0) throw_error(error_code::shape, op_name + ": negative dimension " + std::to_string(d));
        lens.push_back(static_cast<std::size_t>(d));
    }
    return lens;
}
}  // namespace

shape constant_of_shape::compute_shape(const std::vector<shape>& in, const known_inputs& k) const {
    auto any = compute_shape(in);
    if (k.empty() || !k[0]) return any;
    return shape(value.get_shape().get_type(), lens_from(*k[0], name()));
}

argument constant_of_shape::compute(const shape&, const std::vector<argument>& args) const {
    argument out(shape(value.get_shape().get_type(), lens_from(args[0], name())));
    visit_bytes(out.get_shape().get_type(), [&](auto tag) {
        using U = typename decltype(tag)::type;
        U* d = out.template data_as<U>();
        std::fill(d, d + out.get_shape().elements(), *value.get_argument().template data_as<U>());
    });
    return out;
}

// ---- range

shape range::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 3);
    check_same_type(name(), in);
    for (std::size_t i = 0; i < 3; ++i)
        if (in[i].ndim() > 1 || (!in[i].dynamic() && in[i].elements() != 1))
            throw_error(error_code::shape, name() + ": input " + std::to_string(i) + " must be a scalar, got " +
                                               in[i].to_string());
    auto t = in[0].get_type();
    if (!is_float(t) && !is_signed_int(t))
        throw_error(error_code::type, name() + ": unsupported element type " + std::string(type_name(t)));
    return unknown_dims(t, 1);
}

argument range::compute(const shape&, const std::vector<argument>& args) const {
    auto t = args[0].get_shape().get_type();
    return visit_numeric(t, [&](auto tag) {
        using C = typename decltype(tag)::type;
        argument result;
        if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
            auto s = args[0].get_int64(0), l = args[1].get_int64(0), d = args[2].get_int64(0);
            if (d == 0) throw_error(error_code::runtime, name() + ": delta is zero");
            // The span can exceed int64 (e.g. INT64_MIN to INT64_MAX): count in 128 bits.
            __int128 span = static_cast<__int128>(l) - s, n128 = 0;
            if ((d > 0 && span > 0) || (d < 0 && span < 0)) n128 = (span + d + (d > 0 ? -1 : 1)) / d;
            if (n128 > (static_cast<__int128>(1) << 40))
                throw_error(error_code::runtime, name() + ": the range is too long");
            auto n = static_cast<std::int64_t>(n128);
            result = argument(shape(t, {static_cast<std::size_t>(n)}));
            for (std::int64_t i = 0; i < n; ++i) result.data_as<C>()[i] = static_cast<C>(s + i * d);
        } else {
            // The stored scalars are exact in double; the length uses them as stored.
            double s = args[0].get_double(0), l = args[1].get_double(0), d = args[2].get_double(0);
            if (d == 0) throw_error(error_code::runtime, name() + ": delta is zero");
            double n = std::max(std::ceil((l - s) / d), 0.0);
            if (!(n < 1e12)) throw_error(error_code::runtime, name() + ": the range is too long");
            result = argument(shape(t, {static_cast<std::size_t>(n)}));
            for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i)
                result.data_as<C>()[i] = convert<C>(s + static_cast<double>(i) * d);
        }
        return result;
    }, name());
}

// ---- eye_like

shape eye_like::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1);
    check_rank(name(), in[0], 2, 2);
    check_dim_value(k, name(), "k", true);
    return shape(dtype.value_or(in[0].get_type()), in[0].lens());
}

argument eye_like::compute(const shape& out, const std::vector<argument>&) const {
    argument r(out);
    const auto& l = out.lens();
    visit_numeric(out.get_type(), [&](auto tag) {
        using C = typename decltype(tag)::type;
        C one = convert<C>(1);
        for (std::size_t i = 0; i < l[0]; ++i) {
            auto j = static_cast<std::int64_t>(i) + k;
            if (j >= 0 && j < static_cast<std::int64_t>(l[1])) r.data_as<C>()[i * l[1] + static_cast<std::size_t>(j)] = one;
        }
    }, name());
    return r;
}

// ---- one_hot

std::int64_t read_depth(const argument& a, const std::string& op_name) {
    if (a.get_shape().elements() != 1)
        throw_error(error_code::shape, op_name + ": depth must hold one value, got " + a.get_shape().to_string());
    double raw = a.get_double(0);
    if (!(raw >= 1 && raw <= static_cast<double>(max_dim)))
        throw_error(error_code::shape, op_name + ": depth must be in [1, 2^48], got " + std::to_string(raw));
    return static_cast<std::int64_t>(raw);
}

shape one_hot::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 2);
    if (in[1].ndim() != 1 || in[1].lens()[0] != 2)
        throw_error(error_code::shape, name() + ": values must be [off, on], got " + in[1].to_string());
    check_dim_value(depth, name(), "depth");
    auto rank = in[0].ndim() + 1;
    auto a = normalize_axis(axis, rank, name());
    auto lens = in[0].lens();
    lens.insert(lens.begin() + static_cast<std::ptrdiff_t>(a), static_cast<std::size_t>(depth));
    return shape(in[1].get_type(), lens);
}

argument one_hot::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& ol = out.lens();
    auto a = normalize_axis(axis, ol.size(), name());
    auto ind = args[0].to_vector<double>();
    std::size_t inner = 1;
    for (std::size_t d = a + 1; d < ol.size(); ++d) inner *= ol[d];
    auto values = args[1].contiguous();
    return copy_by_index(out, values, [&](std::size_t i) {
        std::size_t pos = (i / inner) % static_cast<std::size_t>(depth);
        std::size_t outer = i / (inner * static_cast<std::size_t>(depth));
        auto v = static_cast<std::int64_t>(ind[outer * inner + i % inner]);
        if (v < 0) v += depth;
        return std::int64_t{v == static_cast<std::int64_t>(pos) ? 1 : 0};
    });
}

shape one_hot_dynamic::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 3);
    if (in[2].ndim() != 1)
        throw_error(error_code::shape, name() + ": values must be [off, on], got " + in[2].to_string());
    auto rank = in[0].ndim() + 1;
    auto a = normalize_axis(axis, rank, name());
    auto dd = in[0].to_dynamic_dims();
    dd.insert(dd.begin() + static_cast<std::ptrdiff_t>(a), dynamic_dimension{0, dynamic_dimension::unbounded, {}});
    return shape::make_dynamic(in[2].get_type(), dd);
}

argument one_hot_dynamic::compute(const shape&, const std::vector<argument>& args) const {
    one_hot o{axis, read_depth(args[1], name())};
    return o.compute(o.compute_shape({args[0].get_shape(), args[2].get_shape()}), {args[0], args[2]});
}

std::optional<static_form> one_hot_dynamic::to_static(const known_inputs& k) const {
    if (!k.at(1)) return std::nullopt;
    return static_form{one_hot{axis, read_depth(*k[1], name())}, {0, 2}};
}

// ---- trilu

shape trilu::compute_shape(const std::vector<shape>& in) const {
    check_num_inputs(name(), in, 1, 2);
    check_rank(name(), in[0], 2, 64);
    if (in.size() == 2 && (!is_integer(in[1].get_type()) || in[1].elements() != 1))
        throw_error(error_code::type, name() + ": k must be one integer, got " + in[1].to_string());
    return in[0].as_standard();
}

argument trilu::compute(const shape& out, const std::vector<argument>& args) const {
    std::int64_t k = args.size() == 2 ? args[1].get_int64(0) : 0;
    const auto& l = out.lens();
    auto rows = l[l.size() - 2], cols = l.back();
    return copy_by_index(out, args[0], [&](std::size_t i) -> std::int64_t {
        auto c = static_cast<std::int64_t>(i % cols);
        auto r = static_cast<std::int64_t>((i / cols) % rows);
        bool keep = upper ? c - r >= k : c - r <= k;
        return keep ? static_cast<std::int64_t>(i) : -1;
    });
}

KILN_REGISTER_OP(constant_of_shape)
KILN_REGISTER_OP(range)
KILN_REGISTER_OP(eye_like)
KILN_REGISTER_OP(one_hot)
KILN_REGISTER_OP(one_hot_dynamic)
KILN_REGISTER_OP(trilu)

}  // namespace kiln::op
