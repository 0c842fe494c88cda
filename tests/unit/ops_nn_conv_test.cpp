// convolution, deconvolution and their integer/deformable/causal forms against direct
// loops written here from the ONNX definitions.
#include "ops/nn_conv.hpp"
#include "ops/nn_conv_quant.hpp"
#include "ops/nn_deform_conv.hpp"
#include "ops_nn_helpers.hpp"

using namespace kiln;
using namespace kiln::test_nn;
using lens_t = std::vector<std::size_t>;
using ints = std::vector<std::int64_t>;

namespace {

struct conv_case {
    lens_t x, w;
    ints stride, dilation, pads;  // pads {begin..., end...}
    std::int64_t group = 1;
    bool bias = true;
};

// Visits every multi-index of `lens` in row-major order.
template <class F>
void for_each_index(const lens_t& lens, F f) {
    std::size_t n = 1;
    for (auto l : lens) n *= l;
    lens_t idx(lens.size(), 0);
    for (std::size_t i = 0; i < n; ++i) {
        f(idx);
        for (std::size_t d = lens.size(); d-- > 0;) {
            if (++idx[d] < lens[d]) break;
            idx[d] = 0;
        }
    }
}

// Convolution straight from its definition, in double.
std::vector<double> naive_conv(const conv_case& c, const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b, lens_t& out) {
    const std::size_t r = c.x.size() - 2;
    const std::size_t cg = c.x[1] / static_cast<std::size_t>(c.group), mg = c.w[0] / static_cast<std::size_t>(c.group);
    out = {c.x[0], c.w[0]};
    for (std::size_t d = 0; d < r; ++d) {
        const auto in = static_cast<std::int64_t>(c.x[d + 2]), k = static_cast<std::int64_t>(c.w[d + 2]);
        out.push_back(static_cast<std::size_t>((in + c.pads[d] + c.pads[d + r] - (k - 1) * c.dilation[d] - 1) / c.stride[d] + 1));
    }
    std::vector<double> y;
    lens_t spatial_out(out.begin() + 2, out.end()), kernel(c.w.begin() + 2, c.w.end());
    for (std::size_t n = 0; n < out[0]; ++n)
        for (std::size_t m = 0; m < out[1]; ++m)
            for_each_index(spatial_out, [&](const lens_t& o) {
                double acc = c.bias ? b[m] : 0.0;
                const std::size_t g = m / mg;
                for (std::size_t ci = 0; ci < cg; ++ci)
                    for_each_index(kernel, [&](const lens_t& k) {
                        lens_t xi{n, g * cg + ci}, wi{m, ci};
                        for (std::size_t d = 0; d < r; ++d) {
                            const auto i = static_cast<std::int64_t>(o[d]) * c.stride[d] - c.pads[d] +
                                           static_cast<std::int64_t>(k[d]) * c.dilation[d];
                            if (i < 0 || i >= static_cast<std::int64_t>(c.x[d + 2])) return;
                            xi.push_back(static_cast<std::size_t>(i));
                            wi.push_back(k[d]);
                        }
                        acc += x[flat(c.x, xi)] * w[flat(c.w, wi)];
                    });
                y.push_back(acc);
            });
    return y;
}

void check_conv(const conv_case& c, type t = type::float32, double tol = 1e-4) {
    auto x = random_arg(t, c.x), w = random_arg(t, c.w);
    auto b = random_arg(t, {c.w[0]});
    op::convolution op;
    op.stride = c.stride;
    op.dilation = c.dilation;
    op.padding = c.pads;
    op.group = c.group;
    std::vector<argument> args{x, w};
    if (c.bias) args.push_back(b);
    lens_t out;
    auto expected = naive_conv(c, x.to_vector<double>(), w.to_vector<double>(), b.to_vector<double>(), out);
    auto y = run(op, args);
    EXPECT_EQ(y.get_shape(), shape(t, out));
    expect_near(y, expected, tol, tol);
}

}  // namespace

TEST(ops_nn_conv, conv2d_strides_pads_dilation_groups) {
    check_conv({{2, 4, 9, 7}, {6, 2, 3, 2}, {2, 1}, {1, 2}, {1, 0, 2, 1}, 2});
    check_conv({{1, 3, 8, 8}, {5, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, false});
    check_conv({{1, 6, 7, 5}, {6, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 6});  // depthwise
}

TEST(ops_nn_conv, conv1d_and_conv3d) {
    check_conv({{2, 3, 11}, {4, 3, 3}, {2}, {2}, {1, 2}});
    check_conv({{1, 2, 5, 6, 4}, {3, 2, 2, 3, 2}, {1, 2, 1}, {2, 1, 1}, {0, 1, 1, 1, 0, 0}});
}

TEST(ops_nn_conv, pointwise_and_multi_tile) {
    check_conv({{2, 5, 6, 7}, {3, 5, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}});  // input is its own im2col
    // 64 * 9 rows make the output positions span several im2col tiles.
    check_conv({{1, 64, 21, 19}, {7, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, type::float32, 1e-3);
}

TEST(ops_nn_conv, other_float_types) {
    check_conv({{1, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, type::float64, 1e-12);
    check_conv({{1, 3, 6, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}}, type::float16, 2e-2);
    check_conv({{1, 2, 5, 5}, {2, 2, 2, 2}, {1, 1}, {1, 1}, {0, 0, 0, 0}}, type::bfloat16, 5e-2);
}

TEST(ops_nn_conv, same_padding_modes) {
    // in 7, kernel 4, stride 2: output 4, total padding 3 -> upper {1, 2}, lower {2, 1}.
    auto x = random_arg(type::float32, {1, 2, 7, 7});
    auto w = random_arg(type::float32, {3, 2, 4, 4});
    for (auto mode : {op::pad_mode::same_upper, op::pad_mode::same_lower}) {
        op::convolution same;
        same.stride = {2, 2};
        same.padding_mode = mode;
        op::convolution expl;
        expl.stride = {2, 2};
        expl.padding = mode == op::pad_mode::same_upper ? ints{1, 1, 2, 2} : ints{2, 2, 1, 1};
        auto a = run(same, {x, w});
        EXPECT_EQ(a.get_shape().lens(), (lens_t{1, 3, 4, 4}));
        EXPECT_EQ(a, run(expl, {x, w}));
    }
}

TEST(ops_nn_conv, errors) {
    op::convolution op;
    shape x(type::float32, {1, 4, 5, 5});
    expect_shape_error(op, {x, shape(type::float32, {2, 3, 3, 3})}, error_code::shape);  // channels
    expect_shape_error(op, {x, shape(type::float32, {2, 4, 3})}, error_code::shape);     // rank
    expect_shape_error(op, {x, shape(type::float16, {2, 4, 3, 3})}, error_code::type);
    expect_shape_error(op, {x.with_type(type::int32), shape(type::int32, {2, 4, 3, 3})}, error_code::type);
    expect_shape_error(op, {x, shape(type::float32, {2, 4, 7, 7})}, error_code::shape);  // kernel > input
    expect_shape_error(op, {x, shape(type::float32, {2, 4, 3, 3}), shape(type::float32, {3})}, error_code::shape);
    op.group = 3;
    expect_shape_error(op, {x, shape(type::float32, {3, 1, 3, 3})}, error_code::shape);
    op.group = 1;
    op.stride = {1, 0};
    expect_shape_error(op, {x, shape(type::float32, {2, 4, 3, 3})}, error_code::shape);
}

namespace {

// Transposed convolution by scattering every input element through the kernel.
std::vector<double> naive_deconv(const lens_t& xl, const lens_t& wl, std::int64_t group, const ints& s, const ints& dl,
                                 const ints& pads, const ints& out_pad, const std::vector<double>& x,
                                 const std::vector<double>& w, const std::vector<double>& b, lens_t& out) {
    const std::size_t r = xl.size() - 2, cg = xl[1] / static_cast<std::size_t>(group), mg = wl[1];
    out = {xl[0], mg * static_cast<std::size_t>(group)};
    for (std::size_t d = 0; d < r; ++d)
        out.push_back(static_cast<std::size_t>(s[d] * (static_cast<std::int64_t>(xl[d + 2]) - 1) + out_pad[d] +
                                               (static_cast<std::int64_t>(wl[d + 2]) - 1) * dl[d] + 1 - pads[d] -
                                               pads[d + r]));
    std::size_t total = 1;
    for (auto o : out) total *= o;
    std::vector<double> y(total, 0.0);
    for (std::size_t i = 0; i < total; ++i) y[i] = b.empty() ? 0.0 : b[(i / (total / out[0] / out[1])) % out[1]];
    lens_t in(xl.begin() + 2, xl.end()), kernel(wl.begin() + 2, wl.end());
    for (std::size_t n = 0; n < xl[0]; ++n)
        for (std::size_t c = 0; c < xl[1]; ++c)
            for_each_index(in, [&](const lens_t& i) {
                for (std::size_t m = 0; m < mg; ++m)
                    for_each_index(kernel, [&](const lens_t& k) {
                        lens_t yi{n, (c / cg) * mg + m}, xi{n, c}, wi{c, m};
                        for (std::size_t d = 0; d < r; ++d) {
                            auto o = static_cast<std::int64_t>(i[d]) * s[d] + static_cast<std::int64_t>(k[d]) * dl[d] - pads[d];
                            if (o < 0 || o >= static_cast<std::int64_t>(out[d + 2])) return;
                            yi.push_back(static_cast<std::size_t>(o));
                            xi.push_back(i[d]);
                            wi.push_back(k[d]);
                        }
                        y[flat(out, yi)] += x[flat(xl, xi)] * w[flat(wl, wi)];
                    });
            });
    return y;
}

void check_deconv(const lens_t& xl, const lens_t& wl, std::int64_t group, const ints& s, const ints& dl,
                  const ints& pads, const ints& out_pad, bool bias) {
    auto x = random_arg(type::float32, xl), w = random_arg(type::float32, wl);
    auto b = random_arg(type::float32, {wl[1] * static_cast<std::size_t>(group)});
    op::deconvolution op;
    op.group = group;
    op.stride = s;
    op.dilation = dl;
    op.padding = pads;
    op.output_padding = out_pad;
    std::vector<argument> args{x, w};
    if (bias) args.push_back(b);
    lens_t out;
    auto expected = naive_deconv(xl, wl, group, s, dl, pads, out_pad, x.to_vector<double>(), w.to_vector<double>(),
                                 bias ? b.to_vector<double>() : std::vector<double>{}, out);
    auto y = run(op, args);
    EXPECT_EQ(y.get_shape().lens(), out);
    expect_near(y, expected, 1e-4, 1e-4);
}

}  // namespace

TEST(ops_nn_conv, deconvolution) {
    check_deconv({1, 2, 4, 3}, {2, 3, 3, 3}, 1, {2, 3}, {1, 1}, {1, 0, 0, 2}, {1, 2}, true);
    check_deconv({2, 4, 3, 5}, {4, 1, 2, 3}, 2, {1, 2}, {2, 1}, {0, 0, 0, 0}, {0, 0}, false);
    check_deconv({1, 3, 7}, {3, 2, 4}, 1, {3}, {1}, {2, 1}, {0}, true);
}

TEST(ops_nn_conv, deconvolution_output_size) {
    // Output 10 x 8 from 3 x 3 with stride (3, 2), kernel 3: the natural size is 9 x 7, so
    // the extra row and column appear at the end (negative end padding).
    auto x = random_arg(type::float32, {1, 1, 3, 3}), w = random_arg(type::float32, {1, 2, 3, 3});
    op::deconvolution sized;
    sized.stride = {3, 2};
    sized.output_size = {10, 8};
    EXPECT_EQ(sized.resolved_padding({3, 3}, {3, 3}), (ints{0, 0, -1, -1}));
    op::deconvolution padded;
    padded.stride = {3, 2};
    padded.output_padding = {1, 1};
    auto a = run(sized, {x, w});
    EXPECT_EQ(a.get_shape().lens(), (lens_t{1, 2, 10, 8}));
    EXPECT_EQ(a, run(padded, {x, w}));
    op::deconvolution same;
    same.stride = {2, 2};
    same.padding_mode = op::pad_mode::same_upper;
    EXPECT_EQ(shape_of(same, {x, w}).lens(), (lens_t{1, 2, 6, 6}));
}

TEST(ops_nn_conv, convolution_integer) {
    lens_t xl{1, 2, 5, 4}, wl{3, 2, 2, 2};
    auto xv = random_ints(40, 0, 255), wv = random_ints(24, 0, 255);
    auto x = make_arg(type::uint8, xl, xv), w = make_arg(type::uint8, wl, wv);
    auto xzp = make_arg(type::uint8, {}, std::vector<int>{7});
    auto wzp = make_arg(type::uint8, {3}, std::vector<int>{1, 200, 3});
    op::convolution_integer op;
    op.has_x_zero_point = op.has_w_zero_point = true;
    op.padding = {1, 0, 0, 1};
    std::vector<double> xs(xv.begin(), xv.end()), ws(wv.begin(), wv.end());
    for (auto& v : xs) v -= 7;
    for (std::size_t i = 0; i < ws.size(); ++i) ws[i] -= std::vector<double>{1, 200, 3}[i / 8];
    lens_t out;
    auto expected = naive_conv({xl, wl, {1, 1}, {1, 1}, {1, 0, 0, 1}, 1, false}, xs, ws, {}, out);
    auto y = run(op, {x, w, xzp, wzp});
    EXPECT_EQ(y.get_shape(), shape(type::int32, out));
    expect_near(y, expected, 0, 0);
    expect_shape_error(op, {x.get_shape(), w.get_shape(), xzp.get_shape(), shape(type::uint8, {2})}, error_code::shape);
    expect_shape_error(op, {shape(type::float32, xl), w.get_shape(), xzp.get_shape(), wzp.get_shape()}, error_code::type);
}

TEST(ops_nn_conv, qlinear_convolution) {
    lens_t xl{1, 2, 4, 4}, wl{2, 2, 3, 3};
    auto xv = random_ints(32, 0, 255), wv = random_ints(36, -100, 100);
    auto x = make_arg(type::uint8, xl, xv), w = make_arg(type::int8, wl, wv);
    auto bias = make_arg(type::int32, {2}, std::vector<int>{300, -500});
    auto scalar = [](type t, double v) { return make_arg(t, {}, std::vector<double>{v}); };
    std::vector<argument> args{x, scalar(type::float32, 0.02), scalar(type::uint8, 100), w,
                               make_arg(type::float32, {2}, std::vector<float>{0.01f, 0.03f}),
                               make_arg(type::int8, {2}, std::vector<int>{0, 0}), scalar(type::float32, 0.5),
                               scalar(type::uint8, 128), bias};
    op::qlinear_convolution op;
    op.padding = {1, 1, 1, 1};
    std::vector<double> xs(xv.begin(), xv.end()), ws(wv.begin(), wv.end());
    for (auto& v : xs) v -= 100;
    lens_t out;
    auto acc = naive_conv({xl, wl, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1, true}, xs, ws, {300, -500}, out);
    std::vector<double> expected;
    for (std::size_t i = 0; i < acc.size(); ++i) {
        const double scale = 0.02 * (i < 16 ? 0.01 : 0.03) / 0.5;
        expected.push_back(std::clamp(std::nearbyint(acc[i] * scale) + 128, 0.0, 255.0));
    }
    auto y = run(op, args);
    EXPECT_EQ(y.get_shape(), shape(type::uint8, out));
    // The op forms the scale in float; allow one step where that rounds differently.
    expect_near(y, expected, 0, 1);
}

TEST(ops_nn_conv, deformable_zero_offsets_match_convolution) {
    lens_t xl{1, 4, 6, 5}, wl{4, 2, 3, 3};
    auto x = random_arg(type::float32, xl), w = random_arg(type::float32, wl), b = random_arg(type::float32, {4});
    op::deformable_convolution dc;
    dc.group = 2;
    dc.offset_group = 2;
    dc.padding = {1, 1, 1, 1};
    dc.has_bias = true;
    auto out = shape_of(op::convolution{{{1, 1, 1, 1}, {}, {}, 2}}, {x, w, b});
    argument offsets(shape(type::float32, {1, 2 * 9 * 2, out.lens()[2], out.lens()[3]}));
    auto y = run(dc, {x, w, offsets, b});
    op::convolution conv;
    conv.group = 2;
    conv.padding = {1, 1, 1, 1};
    expect_near(y, run(conv, {x, w, b}).to_vector<double>(), 1e-5, 1e-5);
}

TEST(ops_nn_conv, deformable_fractional_offset_and_mask) {
    // One 1x1 tap sampling halfway between rows: the mean of two neighbours, times the mask.
    auto x = make_arg(type::float32, {1, 1, 3, 2}, std::vector<float>{1, 2, 3, 4, 5, 6});
    auto w = make_arg(type::float32, {1, 1, 1, 1}, std::vector<float>{2});
    auto off = make_arg(type::float32, {1, 2, 3, 2}, std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0.5f, 0, 0, 0, 0, 0, 0});
    auto mask = make_arg(type::float32, {1, 1, 3, 2}, std::vector<float>{1, 1, 1, 1, 0.5f, 0.5f});
    op::deformable_convolution dc;
    dc.has_mask = true;
    // Row 2 + 0.5 reaches past the input: half of row 2 plus zero.
    expect_near(run(dc, {x, w, off, mask}), {2 * 2, 2 * 3, 2 * 4, 2 * 5, 0.5 * 2 * 2.5, 0.5 * 2 * 3});
}

TEST(ops_nn_conv, causal_conv_with_state) {
    const std::size_t b = 2, c = 3, l = 5, k = 3;
    auto x = random_arg(type::float32, {b, c, l}), w = random_arg(type::float32, {c, 1, k});
    auto bias = random_arg(type::float32, {c}), past = random_arg(type::float32, {b, c, k - 1});
    auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = bias.to_vector<double>(), pv = past.to_vector<double>();
    for (bool silu : {false, true}) {
        op::causal_conv_with_state op;
        op.silu = silu;
        op.has_bias = op.has_past_state = true;
        auto r = run(op, {x, w, bias, past});
        std::vector<double> y, state;
        for (std::size_t bc = 0; bc < b * c; ++bc) {
            std::vector<double> seq(pv.begin() + static_cast<std::ptrdiff_t>(bc * (k - 1)),
                                    pv.begin() + static_cast<std::ptrdiff_t>((bc + 1) * (k - 1)));
            seq.insert(seq.end(), xv.begin() + static_cast<std::ptrdiff_t>(bc * l), xv.begin() + static_cast<std::ptrdiff_t>((bc + 1) * l));
            for (std::size_t t = 0; t < l; ++t) {
                double acc = bv[bc % c];
                for (std::size_t j = 0; j < k; ++j) acc += wv[(bc % c) * k + j] * seq[t + j];
                y.push_back(silu ? acc / (1 + std::exp(-acc)) : acc);
            }
            state.insert(state.end(), seq.end() - static_cast<std::ptrdiff_t>(k - 1), seq.end());
        }
        ASSERT_EQ(r.elements().size(), 2u);
        expect_near(r.elements()[0], y);
        expect_near(r.elements()[1], state, 0, 0);
    }
    op::causal_conv_with_state plain;
    auto r = run(plain, {x, w});
    EXPECT_EQ(r.elements()[1].get_shape().lens(), (lens_t{b, c, k - 1}));
    auto xf = x.to_vector<float>();
    EXPECT_EQ(r.elements()[1].to_vector<float>()[0], xf[3]);
    EXPECT_EQ(r.elements()[1].to_vector<float>()[1], xf[4]);
    expect_shape_error(plain, {x.get_shape(), shape(type::float32, {c, 2, k})}, error_code::shape);
}

TEST(ops_nn_conv, dynamic_input_sizes) {
    // Unknown batch and spatial sizes (auto_pad kept symbolic): the output dims follow.
    op::convolution c;
    c.stride = {2, 2};
    c.padding_mode = op::pad_mode::same_upper;
    operation op = c;
    auto x = shape::make_dynamic(type::float32, {{1, 4, {}}, {3, 3, {}}, {8, 64, {}}, {8, 64, {}}});
    auto s = op.compute_shape({x, shape(type::float32, {5, 3, 3, 3})});
    ASSERT_TRUE(s.dynamic());
    EXPECT_EQ(s.dyn_dims()[1], (dynamic_dimension{5, 5, {}}));
    EXPECT_EQ(s.dyn_dims()[2].min, 4u);
    EXPECT_EQ(s.dyn_dims()[2].max, 32u);
    // At run time the concrete input decides the padding: 9 -> 5 positions.
    auto xa = random_arg(type::float32, {1, 3, 9, 9}), w = random_arg(type::float32, {5, 3, 3, 3});
    auto y = run(op, {xa, w});
    EXPECT_EQ(y.get_shape().lens(), (lens_t{1, 5, 5, 5}));
    op::convolution expl;
    expl.stride = {2, 2};
    expl.padding = {1, 1, 1, 1};
    EXPECT_EQ(y, run(expl, {xa, w}));
}

TEST(ops_nn_conv, causal_conv_dynamic_length) {
    op::causal_conv_with_state c;
    operation op = c;
    auto x = shape::make_dynamic(type::float32, {{2, 2, {}}, {3, 3, {}}, {1, 100, {}}});
    auto s = op.compute_shape({x, shape(type::float32, {3, 1, 4})});
    ASSERT_TRUE(s.is_tuple());
    EXPECT_EQ(s.sub_shapes()[0].dyn_dims()[2], (dynamic_dimension{1, 100, {}}));
    EXPECT_EQ(s.sub_shapes()[1], shape(type::float32, {2, 3, 3}));
    host_context ctx;
    auto r = op.compute(ctx, s, {random_arg(type::float32, {2, 3, 7}), random_arg(type::float32, {3, 1, 4})});
    EXPECT_EQ(r.elements()[0].get_shape().lens(), (lens_t{2, 3, 7}));
}
