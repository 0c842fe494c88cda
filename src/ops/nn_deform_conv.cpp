#include "ops/nn_deform_conv.hpp"

#include <kiln/register_op.hpp>

#include <algorithm>
#include <cmath>

namespace kiln::op {

namespace {

void check_lens(const std::string& op_name, const std::string& what, const shape& s,
                const std::vector<std::size_t>& want) {
    if (!s.is_tensor() || s.lens() != want)
        throw_error(error_code::shape, op_name + ": " + what + " is " + s.to_string() + ", expected " +
                                           shape(s.get_type(), want).to_string());
}

// Multilinear interpolation of plane `x` (dims `in`) at `pos`; points outside read 0.
template <class A>
A interpolate(const A* x, const std::vector<std::int64_t>& in, const std::vector<std::int64_t>& strides,
              const std::vector<A>& pos) {
    const std::size_t r = in.size();
    A result = 0;
    for (std::size_t corner = 0; corner < (std::size_t{1} << r); ++corner) {
        A weight = 1;
        std::int64_t offset = 0;
        bool inside = true;
        for (std::size_t d = 0; d < r; ++d) {
            const A lo = std::floor(pos[d]);
            const A frac = pos[d] - lo;
            const bool up = ((corner >> d) & 1) != 0;
            const std::int64_t i = static_cast<std::int64_t>(lo) + (up ? 1 : 0);
            weight *= up ? frac : A(1) - frac;
            inside = inside && i >= 0 && i < in[d];
            offset += i * strides[d];
        }
        if (inside) result += weight * x[offset];
    }
    return result;
}

}  // namespace

shape deformable_convolution::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 3 + (has_bias ? 1 : 0) + (has_mask ? 1 : 0));
    check_same_type(name(), inputs);
    if (!is_float_compute_type(inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported (float16, bfloat16, float32, float64)");
    auto g = conv_geom(name(), inputs[0], inputs[1]);
    if (offset_group < 1 || g.in_channels % offset_group != 0)
        throw_error(error_code::shape, name() + ": offset_group " + std::to_string(offset_group) +
                                           " must divide the " + std::to_string(g.in_channels) + " input channels");
    const auto taps = static_cast<std::size_t>(product(g.kernel) * offset_group);
    std::vector<std::size_t> lens{static_cast<std::size_t>(g.batch), taps * g.rank()};
    for (auto o : g.out) lens.push_back(static_cast<std::size_t>(o));
    check_lens(name(), "offset", inputs[2], lens);
    std::size_t i = 3;
    if (has_bias) check_conv_bias(name(), inputs[i++], g.out_channels);
    if (has_mask) {
        lens[1] = taps;
        check_lens(name(), "mask", inputs[i], lens);
    }
    lens[1] = static_cast<std::size_t>(g.out_channels);
    return shape(inputs[0].get_type(), lens);
}

argument deformable_convolution::compute(const shape& out, const std::vector<argument>& args) const {
    const auto g = conv_geom(name(), args[0].get_shape(), args[1].get_shape());
    return visit_float_compute(out.get_type(), name(), [&](auto tag) {
        using A = typename decltype(tag)::type;
        auto x = read_as<A>(args[0]);
        auto w = read_as<A>(args[1]);
        auto off = read_as<A>(args[2]);
        compute_buffer<A> bias, mask;
        std::size_t i = 3;
        if (has_bias) bias = read_as<A>(args[i++]);
        if (has_mask) mask = read_as<A>(args[i]);
        const std::size_t r = g.rank();
        const std::int64_t positions = product(g.out), plane = product(g.in), kernel_size = product(g.kernel);
        const std::int64_t cg = g.in_channels / g.group, mg = g.out_channels / g.group;
        const std::int64_t per_offset_group = g.in_channels / offset_group;
        const auto base = window_starts(g, 0, positions);
        const auto in_strides = row_major_strides(g.in);
        std::vector<A> col(static_cast<std::size_t>(cg * kernel_size * positions));
        std::vector<A> pos(r);
        std::vector<std::int64_t> k(r);
        return produce<A>(out, [&](A* y) {
            for (std::int64_t n = 0; n < g.batch; ++n) {
                for (std::int64_t gi = 0; gi < g.group; ++gi) {
                    for (std::int64_t c = 0; c < cg; ++c) {
                        const std::int64_t cc = gi * cg + c;
                        const std::int64_t og = cc / per_offset_group;
                        const A* xc = x.data() + (n * g.in_channels + cc) * plane;
                        std::fill(k.begin(), k.end(), 0);
                        for (std::int64_t kk = 0; kk < kernel_size; ++kk) {
                            const std::int64_t tap = (n * offset_group + og) * kernel_size + kk;
                            A* row = col.data() + (c * kernel_size + kk) * positions;
                            for (std::int64_t p = 0; p < positions; ++p) {
                                for (std::size_t d = 0; d < r; ++d)
                                    pos[d] = static_cast<A>(base[d][static_cast<std::size_t>(p)] + k[d] * g.dilation[d]) +
                                             off[static_cast<std::size_t>((tap * static_cast<std::int64_t>(r) +
                                                                           static_cast<std::int64_t>(d)) * positions + p)];
                                A v = interpolate(xc, g.in, in_strides, pos);
                                if (has_mask) v *= mask[static_cast<std::size_t>(tap * positions + p)];
                                row[p] = v;
                            }
                            for (std::size_t d = r; d-- > 0;) {
                                if (++k[d] < g.kernel[d]) break;
                                k[d] = 0;
                            }
                        }
                    }
                    A* yg = y + (n * g.out_channels + gi * mg) * positions;
                    gemm_kernel<A>(mg, positions, cg * kernel_size, w.data() + gi * mg * cg * kernel_size,
                                   cg * kernel_size, 1, col.data(), positions, yg, positions, false);
                    if (has_bias)
                        for (std::int64_t m = 0; m < mg; ++m)
                            for (std::int64_t p = 0; p < positions; ++p) yg[m * positions + p] += bias[gi * mg + m];
                }
            }
        });
    });
}

shape causal_conv_with_state::compute_shape(const std::vector<shape>& inputs) const {
    check_num_inputs(name(), inputs, 2 + (has_bias ? 1 : 0) + (has_past_state ? 1 : 0));
    check_same_type(name(), inputs);
    if (!is_float_compute_type(inputs[0].get_type()))
        throw_error(error_code::type, name() + ": element type " + std::string(type_name(inputs[0].get_type())) +
                                          " is not supported (float16, bfloat16, float32, float64)");
    if (std::any_of(inputs.begin(), inputs.end(), [](const shape& s) { return s.dynamic(); })) {
        for (auto& s : inputs)
            if (!s.is_tensor() || s.ndim() != (&s == &inputs[2] && has_bias ? 1u : 3u))
                throw_error(error_code::shape, name() + ": input " + s.to_string() + " has the wrong rank");
        auto xd = inputs[0].to_dynamic_dims();
        auto kd = inputs[1].to_dynamic_dims()[2];
        dynamic_dimension keep = kd.is_fixed() ? dynamic_dimension{kd.min - 1, kd.min - 1, {}}
                                               : dynamic_dimension{0, dynamic_dimension::unbounded, {}};
        const type t = inputs[0].get_type();
        return shape::tuple({shape::make_dynamic(t, xd), shape::make_dynamic(t, {xd[0], xd[1], keep})});
    }
    check_rank(name(), inputs[0], 3, 3, "input");
    check_rank(name(), inputs[1], 3, 3, "weight");
    const auto& x = inputs[0].lens();
    const auto& w = inputs[1].lens();
    if (w[0] != x[1] || w[1] != 1 || w[2] < 1)
        throw_error(error_code::shape, name() + ": weight " + inputs[1].to_string() + " must be (" +
                                           std::to_string(x[1]) + ", 1, k) for input " + inputs[0].to_string());
    std::size_t i = 2;
    if (has_bias) check_conv_bias(name(), inputs[i++], static_cast<std::int64_t>(x[1]));
    std::vector<std::size_t> state{x[0], x[1], w[2] - 1};
    if (has_past_state) check_lens(name(), "past_state", inputs[i], state);
    return shape::tuple({shape(inputs[0].get_type(), x), shape(inputs[0].get_type(), state)});
}

argument causal_conv_with_state::compute(const shape&, const std::vector<argument>& args) const {
    std::vector<shape> in;
    for (auto& a : args) in.push_back(a.get_shape());
    const shape out = compute_shape(in);
    const auto& xl = args[0].get_shape().lens();
    const std::size_t batch = xl[0], channels = xl[1], length = xl[2];
    const std::size_t kernel = args[1].get_shape().lens()[2], keep = kernel - 1;
    const type t = args[0].get_shape().get_type();
    return visit_float_compute(t, name(), [&](auto tag) {
        using A = typename decltype(tag)::type;
        auto x = read_as<A>(args[0]);
        auto w = read_as<A>(args[1]);
        compute_buffer<A> bias, past;
        std::size_t i = 2;
        if (has_bias) bias = read_as<A>(args[i++]);
        if (has_past_state) past = read_as<A>(args[i]);
        std::vector<A> seq(keep + length);
        std::vector<A> y(batch * channels * length), state(batch * channels * keep);
        for (std::size_t bc = 0; bc < batch * channels; ++bc) {
            const std::size_t c = bc % channels;
            for (std::size_t j = 0; j < keep; ++j) seq[j] = has_past_state ? past[bc * keep + j] : A(0);
            for (std::size_t j = 0; j < length; ++j) seq[keep + j] = x[bc * length + j];
            for (std::size_t tpos = 0; tpos < length; ++tpos) {
                A acc = has_bias ? bias[c] : A(0);
                for (std::size_t k = 0; k < kernel; ++k) acc += w[c * kernel + k] * seq[tpos + k];
                y[bc * length + tpos] = acc;
            }
            for (std::size_t j = 0; j < keep; ++j) state[bc * keep + j] = seq[length + j];
        }
        auto store = [&](const shape& s, const std::vector<A>& v, bool activation) {
            argument r(s);
            visit_numeric(t, [&](auto ttag) {
                using T = typename decltype(ttag)::type;
                T* p = r.data_as<T>();
                for (std::size_t j = 0; j < v.size(); ++j) {
                    p[j] = convert<T>(v[j]);
                    if (activation) {
                        // The convolution's result is rounded to T before the activation.
                        const A z = convert<A>(p[j]);
                        p[j] = convert<T>(z / (A(1) + std::exp(-z)));
                    }
                }
            }, name());
            return r;
        };
        return argument::make_tuple({store(out.sub_shapes()[0], y, silu), store(out.sub_shapes()[1], state, false)});
    });
}

KILN_REGISTER_OP(deformable_convolution)
KILN_REGISTER_OP(causal_conv_with_state)

}  // namespace kiln::op
