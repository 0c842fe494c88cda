// cpu::dyn_primitive (a generic program's convolutions and poolings: a oneDNN primitive
// per input shape, made on the first call with it) against the reference kernels: a
// small residual CNN with a dynamic batch and image size compiles once and matches ref at
// every size; inputs in either channel order; grouped, strided and dilated convolutions;
// a pooling oneDNN has no form for (the reference kernel runs it); the cache's bound.
#include "cpu_test_util.hpp"

#include "ops/nn_conv.hpp"
#include "ops/nn_pooling.hpp"
#include "ops/reduce.hpp"
#include "targets/cpu/context.hpp"
#include "targets/cpu/kernels/dynamic/dyn_primitive.hpp"

#include <kiln/program.hpp>

#include <thread>

using namespace kiln;
using namespace kiln::cpu_test;

namespace {

argument random_arg(const std::vector<std::size_t>& lens) { return random_literal(lens).get_argument(); }

// The same values as `a`, stored channels-last.
argument channels_last_copy(const argument& a) {
    const auto& l = a.get_shape().lens();
    argument out(shape(type::float32, l, cpu::channels_last_strides(l)));
    const auto& from = a.get_shape();
    const auto& to = out.get_shape();
    std::vector<std::size_t> idx(l.size(), 0);
    for (std::size_t n = 0; n < from.elements(); ++n) {
        out.data_as<float>()[to.index(idx)] = a.data_as<float>()[from.index(idx)];
        for (std::size_t d = l.size(); d-- > 0;) {
            if (++idx[d] < l[d]) break;
            idx[d] = 0;
        }
    }
    return out;
}

// conv(3 -> 8, 3x3, pad 1) + bias, relu; conv(8 -> 8, 3x3, pad 1) + residual, relu;
// max pool 2x2 stride 2; average pool 3x3 stride 1 pad 1 (not counting the padding).
program residual_cnn(const literal& w1, const literal& b1, const literal& w2) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 8, {}}, {3, 3, {}}, {4, 32, {}}, {4, 32, {}}}));
    op::convolution c;
    c.padding = {1, 1, 1, 1};
    auto y1 = m->add_instruction(c, {x, m->add_literal(w1), m->add_literal(b1)});
    auto r1 = m->add_instruction(make_op("relu"), {y1});
    auto y2 = m->add_instruction(c, {r1, m->add_literal(w2)});
    auto s = m->add_instruction(make_op("add"), {y2, r1});
    auto r2 = m->add_instruction(make_op("relu"), {s});
    op::pooling mp;
    mp.lengths = {2, 2};
    mp.stride = {2, 2};
    auto pooled = m->add_instruction(mp, {r2});
    op::pooling ap;
    ap.mode = op::pooling_mode::average;
    ap.lengths = {3, 3};
    ap.stride = {1, 1};
    ap.padding = {1, 1, 1, 1};
    m->add_return({m->add_instruction(ap, {pooled})});
    return p;
}

}  // namespace

TEST(cpu_dyn_primitive, residual_cnn_compiles_once_and_matches_ref_at_every_size) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling", "relu", "add");
    const auto w1 = random_literal({8, 3, 3, 3}, 0.3f), b1 = random_literal({8}), w2 = random_literal({8, 8, 3, 3}, 0.2f);
    auto p = residual_cnn(w1, b1, w2), r = residual_cnn(w1, b1, w2);
    compile_options o;
    o.specialize_after = 0;  // every call on the generic program
    p.compile(*get_target("cpu"), o);
    r.compile(*get_target("ref"), o);
    ASSERT_TRUE(p.get_specialization_stats().generic) << p.get_specialization_stats().generic_unavailable;
    for (auto [n, h, w] : std::vector<std::tuple<std::size_t, std::size_t, std::size_t>>{
             {1, 8, 8}, {3, 8, 8}, {2, 17, 9}, {8, 32, 32}, {1, 4, 4}, {3, 8, 8}}) {
        SCOPED_TRACE("x [" + std::to_string(n) + ", 3, " + std::to_string(h) + ", " + std::to_string(w) + "]");
        auto x = random_arg({n, 3, h, w});
        auto got = p.eval({{"x", x}});
        auto want = r.eval({{"x", x}});
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
        // The pooling writes channels-last; the caller gets row-major values, as from a
        // static program.
        EXPECT_TRUE(got[0].get_shape().standard()) << got[0].get_shape().to_string();
        expect_close(got[0], want[0]);
    }
    EXPECT_EQ(p.get_specialization_stats().compiles, 0u);
    // The convolutions took the relus and the residual add: four instructions in all
    // (profiled as "cpu::dyn_primitive(convolution)" and "...(pooling)").
    std::vector<instruction_profile> profile;
    p.eval({{"x", random_arg({2, 3, 8, 8})}}, profile);
    std::size_t dyn = 0, others = 0;
    std::string names;
    for (auto& e : profile) {
        names += e.op_name + " ";
        if (e.op_name.rfind("cpu::dyn_primitive(", 0) == 0) ++dyn;
        else if (e.op_name == "relu" || e.op_name == "add" || e.op_name == "convolution" || e.op_name == "pooling") ++others;
    }
    EXPECT_EQ(dyn, 4u) << names;
    EXPECT_EQ(others, 0u) << names;
}

TEST(cpu_dyn_primitive, either_channel_order_grouped_strided_dilated) {
    cpu::cpu_context ctx(compile_options{});
    op::convolution c;
    c.group = 4;
    c.stride = {2, 1};
    c.dilation = {1, 2};
    c.padding = {1, 2, 0, 1};
    const auto w = random_arg({8, 2, 3, 3});
    const auto b = random_arg({8});
    cpu::dyn_primitive d;
    d.op = c;
    d.has_bias = true;
    for (auto lens : std::vector<std::vector<std::size_t>>{{2, 8, 9, 11}, {1, 8, 5, 5}}) {
        auto x = random_arg(lens);
        auto out = c.compute_shape({x.get_shape(), w.get_shape(), b.get_shape()});
        auto want = c.compute(out, {x, w, b});
        auto plain = d.compute(ctx, out, {x, w, b});
        auto last = d.compute(ctx, out, {channels_last_copy(x), w, b});
        EXPECT_TRUE(cpu::is_channels_last(plain.get_shape()));
        expect_close(plain, want);
        expect_close(last, want);
    }
    EXPECT_EQ(d.cached_shapes(), 4u);  // two sizes, each in two channel orders
}

// Mask R-CNN's mask head upsamples each RoI's features with a transposed convolution, the
// RoI count known only at run time: the same primitive per shape as a convolution's.
TEST(cpu_dyn_primitive, a_transposed_convolution_over_a_run_time_batch) {
    cpu::cpu_context ctx(compile_options{});
    op::deconvolution c;
    c.stride = {2, 2};
    const auto w = random_arg({8, 4, 2, 2});
    const auto b = random_arg({4});
    cpu::dyn_primitive d;
    d.op = c;
    d.has_bias = true;
    for (auto lens : std::vector<std::vector<std::size_t>>{{3, 8, 7, 7}, {1, 8, 7, 7}, {5, 8, 4, 6}}) {
        auto x = random_arg(lens);
        auto out = c.compute_shape({x.get_shape(), w.get_shape(), b.get_shape()});
        auto want = c.compute(out, {x, w, b});
        expect_close(d.compute(ctx, out, {x, w, b}), want);
    }
    EXPECT_EQ(d.cached_shapes(), 3u);
}

TEST(cpu_dyn_primitive, a_mean_over_the_spatial_axes_is_a_global_average_pooling) {
    // mnasnet's x.mean([2, 3]) after its last convolution (a channels-last input), with and
    // without the kept dims, the axes written either way.
    for (bool keep : {false, true})
        for (const std::vector<std::int64_t>& axes : {std::vector<std::int64_t>{2, 3}, std::vector<std::int64_t>{-1, -2}}) {
            SCOPED_TRACE(std::string(keep ? "keepdims" : "no keepdims") + ", axes " + std::to_string(axes[0]));
            program p;
            auto* m = p.get_main_module();
            auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 4, {}}, {3, 3, {}}, {2, 20, {}}, {2, 20, {}}}));
            op::convolution c;
            c.padding = {1, 1, 1, 1};
            auto y = m->add_instruction(c, {x, m->add_literal(random_literal({6, 3, 3, 3}, 0.3f))});
            op::reduce_mean mean;
            mean.axes = axes;
            mean.keepdims = keep;
            m->add_return({m->add_instruction(mean, {y})});
            program r = p;
            compile_options o;
            o.specialize_after = 0;
            p.compile(*get_target("cpu"), o);
            r.compile(*get_target("ref"), o);
            for (auto [n, h, w] : std::vector<std::tuple<std::size_t, std::size_t, std::size_t>>{{1, 2, 2}, {3, 9, 17}, {4, 20, 20}}) {
                auto in = random_arg({n, 3, h, w});
                auto got = p.eval({{"x", in}});
                auto want = r.eval({{"x", in}});
                ASSERT_EQ(got.size(), 1u);
                EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
                expect_close(got[0], want[0]);
            }
            std::vector<instruction_profile> profile;
            p.eval({{"x", random_arg({2, 3, 5, 6})}}, profile);
            std::size_t pooled = 0, means = 0;
            for (auto& e : profile) {
                pooled += e.op_name == "cpu::dyn_primitive(pooling)";
                means += e.op_name == "reduce_mean";
            }
            EXPECT_EQ(pooled, 1u);
            EXPECT_EQ(means, 0u) << "the mean ran on the reference kernel";
        }
}

TEST(cpu_dyn_primitive, a_pooling_without_a_onednn_form_runs_the_reference_kernel) {
    cpu::cpu_context ctx(compile_options{});
    op::pooling ap;  // ceil_mode with count_include_pad: oneDNN divides by another window
    ap.mode = op::pooling_mode::average;
    ap.lengths = {3, 3};
    ap.stride = {2, 2};
    ap.padding = {1, 1, 1, 1};
    ap.ceil_mode = true;
    ap.count_include_pad = true;
    cpu::dyn_primitive d;
    d.op = ap;
    auto x = random_arg({2, 4, 8, 8});
    auto out = ap.compute_shape({x.get_shape()});
    expect_close(d.compute(ctx, out, {x}), ap.compute(out, {x}));
}

TEST(cpu_dyn_primitive, keeps_at_most_max_cached_shapes) {
    cpu::cpu_context ctx(compile_options{});
    op::pooling mp;
    mp.lengths = {2, 2};
    mp.stride = {2, 2};
    cpu::dyn_primitive d;
    d.op = mp;
    for (std::size_t n = 1; n <= cpu::dyn_primitive::max_cached + 4; ++n) {
        auto x = random_arg({n, 2, 4, 4});
        auto out = mp.compute_shape({x.get_shape()});
        expect_close(d.compute(ctx, out, {x}), mp.compute(out, {x}));
    }
    EXPECT_EQ(d.cached_shapes(), cpu::dyn_primitive::max_cached);
}

// Two threads on one generic program, each with its own sizes (new ones and ones the other
// made the primitive for), at the same time: both match ref.
TEST(cpu_dyn_primitive, two_threads_with_different_sizes_at_once) {
    KILN_CPU_NEEDS_OPS("convolution", "pooling", "relu", "add");
    const auto w1 = random_literal({8, 3, 3, 3}, 0.3f), b1 = random_literal({8}), w2 = random_literal({8, 8, 3, 3}, 0.2f);
    auto p = residual_cnn(w1, b1, w2), r = residual_cnn(w1, b1, w2);
    compile_options o;
    o.specialize_after = 0;
    p.compile(*get_target("cpu"), o);
    r.compile(*get_target("ref"), o);
    std::vector<std::vector<argument>> xs(2);
    for (std::size_t t = 0; t < 2; ++t)
        for (std::size_t i = 0; i < 6; ++i) xs[t].push_back(random_arg({1 + (i + t) % 4, 3, 8 + 4 * t, 8 + 4 * (i % 2)}));
    std::vector<std::vector<argument>> got(2);
    std::vector<std::thread> threads;
    for (std::size_t t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
            for (auto& x : xs[t]) got[t].push_back(p.eval({{"x", x}})[0]);
        });
    for (auto& th : threads) th.join();
    for (std::size_t t = 0; t < 2; ++t)
        for (std::size_t i = 0; i < xs[t].size(); ++i) expect_close(got[t][i], r.eval({{"x", xs[t][i]}})[0]);
    EXPECT_EQ(p.get_specialization_stats().compiles, 0u);
}
