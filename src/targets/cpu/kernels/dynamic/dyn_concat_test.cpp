// cpu::dyn_concat (a generic program's Concat) against the reference kernel: DenseNet's
// shape (convolution results concatenated along channels, then a batch norm and a
// convolution) at several sizes; along the last axis and the batch; inputs stored in
// different orders (the element-wise path); and the kernel itself, which keeps the order
// its inputs share.
#include "cpu_test_util.hpp"
#include "ops_run.hpp"

#include "ops/nn_conv.hpp"
#include "targets/cpu/kernels/dynamic/dyn_concat.hpp"
#include "targets/cpu/lowering_util.hpp"

#include <kiln/program.hpp>

using namespace kiln;
using namespace kiln::cpu_test;
using kiln::test::compile_generic_pair;
using kiln::test::ops_run;

namespace {

const dynamic_dimension batch{1, 4, {}, "batch"}, height{3, 40, {}, "h"};
dynamic_dimension fixed(std::size_t v) { return {v, v, {}, {}}; }

// A dense block: x0 = conv(x), y1 = conv(x0), c1 = concat(x0, y1), y2 = conv(relu(bn(c1))), c2 = concat(c1, y2).
program dense_block() {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {batch, fixed(4), height, fixed(9)}));
    op::convolution c;
    c.padding = {1, 1, 1, 1};
    // The stem's result and every layer's are channels-last (cpu::dyn_primitive's).
    auto x0 = m->add_instruction(c, {x, m->add_literal(random_literal({4, 4, 3, 3}, 0.3f))});
    auto y1 = m->add_instruction(c, {x0, m->add_literal(random_literal({3, 4, 3, 3}, 0.3f))});
    auto c1 = m->add_instruction(make_op("concat", {{"axis", 1}}), {x0, y1});
    auto bn = m->add_instruction(make_op("batch_norm_inference", {{"epsilon", 1e-5f}}),
                                 {c1, m->add_literal(random_literal({7}, 0.5f)), m->add_literal(random_literal({7})),
                                  m->add_literal(random_literal({7})),
                                  m->add_literal(literal(shape(type::float32, {7}), std::vector<float>(7, 1.5f)))});
    auto y2 = m->add_instruction(c, {m->add_instruction(make_op("relu"), {bn}),
                                     m->add_literal(random_literal({5, 7, 3, 3}, 0.3f))});
    m->add_return({m->add_instruction(make_op("concat", {{"axis", 1}}), {c1, y2})});
    return p;
}

// Concats of row-major inputs along `axis` (negative allowed), one of them transposed
// (stored in another order) when `mixed`.
program plain_concat(std::int64_t axis, bool mixed) {
    program p;
    auto* m = p.get_main_module();
    auto a = m->add_parameter("a", shape::make_dynamic(type::float32, {batch, height, fixed(6)}));
    auto b = mixed ? m->add_instruction(make_op("transpose", {{"perm", {0, 2, 1}}}),
                                        {m->add_parameter("bt", shape::make_dynamic(type::float32, {batch, fixed(6), height}))})
                   : m->add_parameter("b", shape::make_dynamic(type::float32, {batch, height, fixed(6)}));
    m->add_return({m->add_instruction(make_op("concat", {{"axis", axis}}), {a, b, a})});
    return p;
}

void expect_generic_matches_ref(program p, const std::function<param_map(std::size_t, std::size_t)>& inputs) {
    program r = p;
    ASSERT_TRUE(compile_generic_pair(p, r));
    for (auto [n, h] : std::vector<std::pair<std::size_t, std::size_t>>{{1, 3}, {2, 17}, {4, 40}, {2, 17}}) {
        SCOPED_TRACE("batch " + std::to_string(n) + ", h " + std::to_string(h));
        const auto in = inputs(n, h);
        auto got = p.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
        expect_close(got[0], want[0]);
        auto ops = ops_run(p, in);
        EXPECT_EQ(ops["concat"], 0u) << "concat ran on the reference kernel";
        EXPECT_GE(ops["cpu::dyn_concat"], 1u);
    }
}

}  // namespace

TEST(cpu_dyn_concat, a_dense_block_matches_ref_at_every_size) {
    expect_generic_matches_ref(dense_block(), [](std::size_t n, std::size_t h) {
        return param_map{{"x", random_literal({n, 4, h, 9}).get_argument()}};
    });
}

TEST(cpu_dyn_concat, row_major_and_mixed_inputs_along_any_axis) {
    for (std::int64_t axis : {0, 1, -1})
        for (bool mixed : {false, true}) {
            SCOPED_TRACE("axis " + std::to_string(axis) + (mixed ? ", one input transposed" : ""));
            expect_generic_matches_ref(plain_concat(axis, mixed), [mixed](std::size_t n, std::size_t h) {
                param_map in{{"a", random_literal({n, h, 6}).get_argument()}};
                if (mixed) in.emplace("bt", random_literal({n, 6, h}).get_argument());
                else in.emplace("b", random_literal({n, h, 6}).get_argument());
                return in;
            });
        }
}

TEST(cpu_dyn_concat, keeps_the_order_its_inputs_share) {
    // Two channels-last images along channels: the result is channels-last, and holds the
    // values; with one row-major input, a row-major result.
    auto ctx = get_target("cpu")->make_context(compile_options{});
    const auto a = random_literal({2, 3, 4, 5}).get_argument(), b = random_literal({2, 2, 4, 5}).get_argument();
    auto channels_last = [](const argument& x) {
        const auto& l = x.get_shape().lens();
        argument out(shape(type::float32, l, cpu::channels_last_strides(l)));
        x.copy_to(out);
        return out;
    };
    cpu::dyn_concat op;
    op.axis = 1;
    const auto ref_concat = make_op("concat", {{"axis", 1}});
    const auto expected = ref_concat.compute(*ctx, ref_concat.compute_shape({a.get_shape(), b.get_shape()}), {a, b});
    for (bool both : {true, false}) {
        SCOPED_TRACE(both ? "both channels-last" : "one row-major");
        const std::vector<argument> args{channels_last(a), both ? channels_last(b) : b};
        const auto y = op.compute(*ctx, op.compute_shape({args[0].get_shape(), args[1].get_shape()}), args);
        EXPECT_EQ(y.get_shape().lens(), (std::vector<std::size_t>{2, 5, 4, 5}));
        if (both) EXPECT_EQ(y.get_shape().strides(), cpu::channels_last_strides({2, 5, 4, 5}));
        else EXPECT_TRUE(y.get_shape().standard());
        EXPECT_EQ(y.copy(), expected);
    }
}

// A static input beside a dynamic one (a KV cache: the past of any length, then the step's
// static key; or the other way round): the static input's dims are read as fixed ranges.
TEST(cpu_dyn_concat, a_static_input_beside_dynamic_ones) {
    for (const bool static_first : {false, true}) {
        SCOPED_TRACE(static_first ? "static input first" : "static input last");
        program p;
        auto* m = p.get_main_module();
        auto past = m->add_parameter("past", shape::make_dynamic(type::float32, {fixed(2), height, fixed(6)}));
        auto step = m->add_parameter("step", shape(type::float32, {2, 1, 6}));
        const std::vector<instruction_ref> parts = static_first ? std::vector{step, past} : std::vector{past, step};
        m->add_return({m->add_instruction(make_op("concat", {{"axis", 1}}), parts)});
        expect_generic_matches_ref(p, [](std::size_t, std::size_t h) {
            return param_map{{"past", random_literal({2, h, 6}).get_argument()},
                             {"step", random_literal({2, 1, 6}).get_argument()}};
        });
    }
}
