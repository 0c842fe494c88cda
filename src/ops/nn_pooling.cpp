#include "ops/nn_pooling.hpp"

#include <kiln/register_op.hpp>

#include <cmath>
#include <limits>

namespace kiln::op {

namespace {

bool pool_type_ok(pooling_mode mode, type t) {
    if (is_float_compute_type(t)) return true;
    return mode == pooling_mode::max && (t == type::int8 || t == type::uint8);
}

std::vector<std::size_t> pooled_lens(const shape& x, const pooling::geometry& g) {
    std::vector<std::size_t> lens{x.lens()[0], x.lens()[1]};
    for (auto o : g.out) lens.push_back(static_cast<std::size_t>(o));
    return lens;
}

// Pools every (batch, channel) plane of x (row-major, as double) into y; when
// `indices` is not null, also writes the flat input index of each maximum using
// `index_strides` for the spatial part.
void pool_planes(const pooling& op, const pooling::geometry& g, std::int64_t planes, const double* x, double* y,
                 std::int64_t* indices, const std::vector<std::int64_t>& index_strides) {
    const std::size_t r = g.in.size();
    const std::int64_t in_plane = product(g.in), out_plane = product(g.out), kernel_size = product(g.kernel);
    const auto in_strides = row_major_strides(g.in);
    std::vector<std::int64_t> o(r), k(r);
    for (std::int64_t pl = 0; pl < planes; ++pl) {
        const double* xp = x + pl * in_plane;
        std::fill(o.begin(), o.end(), 0);
        for (std::int64_t q = 0; q < out_plane; ++q) {
            double acc = op.mode == pooling_mode::max ? -std::numeric_limits<double>::infinity() : 0.0;
            std::int64_t best = -1, inside_count = 0, padded_count = 0;
            std::fill(k.begin(), k.end(), 0);
            for (std::int64_t kk = 0; kk < kernel_size; ++kk) {
                std::int64_t offset = 0, index = 0;
                bool inside = true, in_padded = true;
                for (std::size_t d = 0; d < r; ++d) {
                    const std::int64_t i = o[d] * g.stride[d] - g.pad_begin[d] + k[d] * g.dilation[d];
                    inside = inside && i >= 0 && i < g.in[d];
                    in_padded = in_padded && i >= -g.pad_begin[d] && i < g.in[d] + g.pad_end[d];
                    offset += i * in_strides[d];
                    index += i * index_strides[d];
                }
                padded_count += in_padded ? 1 : 0;
                if (inside) {
                    ++inside_count;
                    const double v = xp[offset];
                    switch (op.mode) {
                        case pooling_mode::max:
                            if (v > acc || best < 0) {
                                acc = v;
                                best = index;
                            }
                            break;
                        case pooling_mode::average: acc += v; break;
                        case pooling_mode::lp: acc += std::pow(std::fabs(v), static_cast<double>(op.p)); break;
                    }
                }
                for (std::size_t d = r; d-- > 0;) {
                    if (++k[d] < g.kernel[d]) break;
                    k[d] = 0;
                }
            }
            double result = acc;
            if (op.mode == pooling_mode::average) {
                const std::int64_t n = op.count_include_pad ? padded_count : inside_count;
                result = n > 0 ? acc / static_cast<double>(n) : 0.0;
            } else if (op.mode == pooling_mode::lp) {
                result = std::pow(acc, 1.0 / static_cast<double>(op.p));
            }
            y[pl * out_plane + q] = result;
            if (indices) indices[pl * out_plane + q] = pl * in_plane + std::max<std::int64_t>(best, 0);
            for (std::size_t d = r; d-- > 0;) {
                if (++o[d] < g.out[d]) break;
                o[d] = 0;
            }
        }
    }
}

}  // namespace

pooling::geometry pooling::geom(const shape& x) const {
    check_rank(name(), x, 3, 64, "input");
    const std::size_t r = x.ndim() - 2;
    geometry g;
    g.in = spatial_dims(x);
    if (global) {
        g.kernel = g.in;
        g.stride.assign(r, 1);
        g.dilation.assign(r, 1);
        g.pad_begin.assign(r, 0);
        g.pad_end.assign(r, 0);
        g.out.assign(r, 1);
        return g;
    }
    if (lengths.size() != r)
        throw_error(error_code::shape, name() + ": lengths has " + std::to_string(lengths.size()) +
                                           " values, expected " + std::to_string(r) + " for input " + x.to_string());
    g.kernel = spatial_attr(lengths, r, 1, name(), "lengths");
    g.stride = spatial_attr(stride, r, 1, name(), "stride");
    g.dilation = spatial_attr(dilation, r, 1, name(), "dilation");
    auto pads = padding_mode == pad_mode::explicit_pads ? padding_attr(padding, r, name())
                                                        : same_padding(padding_mode, g.in, g.kernel, g.stride, g.dilation);
    g.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
    g.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
    for (std::size_t d = 0; d < r; ++d)
        g.out.push_back(window_output_size(g.in[d], g.kernel[d], g.stride[d], g.dilation[d], g.pad_begin[d],
                                           g.pad_end[d], ceil_mode, name()));
    if (mode == pooling_mode::lp && p < 1)
        throw_error(error_code::shape, name() + ": p must be at least 1, got " + std::to_string(p));
    return g;
}

shape pooling::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 1);
    if (!pool_type_ok(mode, inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported for this mode");
    return shape(inputs[0].get_type(), pooled_lens(inputs[0], geom(inputs[0])));
}

argument pooling::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& xs = args[0].get_shape();
    auto g = geom(xs);
    auto x = read_as<double>(args[0]);
    const auto planes = static_cast<std::int64_t>(xs.lens()[0] * xs.lens()[1]);
    return produce<double>(out, [&](double* y) { pool_planes(*this, g, planes, x.data(), y, nullptr, g.in); });
}

shape pooling_with_indices::compute_shape(const std::vector<shape>& inputs) const {
    if (mode != pooling_mode::max) throw_error(error_code::shape, name() + ": indices exist only for max pooling");
    if (storage_order != 0 && storage_order != 1)
        throw_error(error_code::shape, name() + ": storage_order must be 0 or 1, got " + std::to_string(storage_order));
    auto s = operation(static_cast<const pooling&>(*this)).compute_shape(inputs);
    return shape::tuple({s, s.with_type(type::int64)});
}

argument pooling_with_indices::compute(const shape&, const std::vector<argument>& args) const {
    const auto& xs = args[0].get_shape();
    const shape out = compute_shape({xs});
    auto g = geom(xs);
    auto x = read_as<double>(args[0]);
    const auto planes = static_cast<std::int64_t>(xs.lens()[0] * xs.lens()[1]);
    // Column-major storage order numbers the spatial dims from the first one up.
    std::vector<std::int64_t> index_strides = row_major_strides(g.in);
    if (storage_order == 1) {
        std::int64_t s = 1;
        for (std::size_t d = 0; d < g.in.size(); ++d) {
            index_strides[d] = s;
            s *= g.in[d];
        }
    }
    argument idx(out.sub_shapes()[1]);
    auto values = produce<double>(out.sub_shapes()[0], [&](double* y) {
        pool_planes(*this, g, planes, x.data(), y, idx.data_as<std::int64_t>(), index_strides);
    });
    return argument::make_tuple({values, idx});
}

// The output size MaxUnpool infers from x and the attributes (before output_shape).
std::vector<std::size_t> max_unpool::default_lens(const shape& x) const {
    const std::size_t r = x.ndim() - 2;
    if (lengths.size() != r)
        throw_error(error_code::shape, name() + ": lengths must have " + std::to_string(r) + " values");
    auto s = spatial_attr(stride, r, 1, name(), "stride");
    auto pads = padding_attr(padding, r, name());
    std::vector<std::size_t> lens{x.lens()[0], x.lens()[1]};
    for (std::size_t d = 0; d < r; ++d) {
        const std::int64_t o = (static_cast<std::int64_t>(x.lens()[d + 2]) - 1) * s[d] + lengths[d] - pads[d] - pads[d + r];
        if (o < 1) throw_error(error_code::shape, name() + ": output dimension " + std::to_string(d) + " would be empty");
        lens.push_back(static_cast<std::size_t>(o));
    }
    return lens;
}

shape max_unpool::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2, 3);
    const auto& x = inputs[0];
    check_rank(name(), x, 3, 64, "input x");
    if (!is_float_compute_type(x.get_type()))
        throw_error(error_code::type, name() + ": x " + x.to_string() + " must be a floating-point tensor");
    if (inputs[1].get_type() != type::int64 || !inputs[1].same_lens_and_type(x.with_type(type::int64)))
        throw_error(error_code::shape, name() + ": indices " + inputs[1].to_string() + " must be int64 with x's dims " +
                                           x.to_string());
    auto lens = default_lens(x);
    if (inputs.size() == 3) {
        check_rank(name(), inputs[2], 1, 1, "output_shape");
        std::vector<dynamic_dimension> dims{{x.lens()[0], x.lens()[0], {}}, {x.lens()[1], x.lens()[1], {}}};
        for (std::size_t i = 2; i < x.ndim(); ++i) dims.push_back({0, dynamic_dimension::unbounded, {}});
        return shape::make_dynamic(x.get_type(), dims);
    }
    if (!output_size.empty()) {
        if (output_size.size() != x.ndim())
            throw_error(error_code::shape, name() + ": output_size must have rank " + std::to_string(x.ndim()));
        return shape(x.get_type(), to_size(output_size));
    }
    return shape(x.get_type(), lens);
}

argument max_unpool::compute(const shape& out, const std::vector<argument>& args) const {
    const auto& xs = args[0].get_shape();
    shape s = out;
    if (args.size() == 3) {
        auto dims = to_int64_vector(args[2]);
        if (dims.size() != xs.ndim())
            throw_error(error_code::shape, name() + ": output_shape has " + std::to_string(dims.size()) +
                                               " values, expected " + std::to_string(xs.ndim()));
        for (auto d : dims)
            if (d < 0) throw_error(error_code::shape, name() + ": output_shape has a negative dimension");
        s = shape(xs.get_type(), to_size(dims));
    }
    // Indices count positions in the inferred output (where MaxPool's input had its
    // maxima); a different output_shape keeps each value at the same coordinates.
    const shape natural(xs.get_type(), default_lens(xs));
    argument r(s.as_standard());
    const auto idx = read_as<std::int64_t>(args[1]);
    const std::size_t n = natural.elements();
    visit_numeric(s.get_type(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        tensor_view<T> x{args[0].template data_as<T>(), xs};
        T* y = r.data_as<T>();
        for (std::size_t i = 0; i < idx.size; ++i) {
            const std::int64_t j = idx[i];
            if (j < 0 || static_cast<std::size_t>(j) >= n)
                throw_error(error_code::runtime, name() + ": index " + std::to_string(j) + " is outside the unpooled " +
                                                     natural.to_string());
            auto at = natural.multi(static_cast<std::size_t>(j));
            bool inside = true;
            for (std::size_t d = 0; d < at.size(); ++d) inside = inside && at[d] < s.lens()[d];
            if (inside) y[r.get_shape().index(at)] = x[i];
        }
    }, name());
    return r;
}

KILN_REGISTER_OP(pooling)
KILN_REGISTER_OP(pooling_with_indices)
KILN_REGISTER_OP(max_unpool)

}  // namespace kiln::op
