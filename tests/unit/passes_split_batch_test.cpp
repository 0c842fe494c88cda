// split_batch: a batched CNN's separable prefix becomes one copy per image on a batch-1
// slice, joined by a concatenation where the prefix is cut; results equal the unsplit
// program's (the reference evaluator, bitwise: each image sees the same arithmetic).
// merge_literals: equal constants stored once.
#include "passes/merge_literals.hpp"
#include "passes/split_batch.hpp"
#include "passes_test_util.hpp"

#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

using namespace kiln;
using kiln::passes_test::check_same_results;
using kiln::passes_test::random_literal;

namespace {

value arr(const std::vector<std::int64_t>& v) { return value(value::array(v.begin(), v.end())); }

std::size_t count(const module& m, const std::string& name) {
    std::size_t n = 0;
    for (const auto& ins : m) n += ins.name() == name ? 1 : 0;
    return n;
}

instruction_ref conv3x3(module& m, instruction_ref x, std::size_t in, std::size_t out, unsigned seed,
                        std::int64_t stride = 1) {
    auto w = m.add_literal(random_literal(shape(type::float32, {out, in, 3, 3}), seed));
    auto b = m.add_literal(random_literal(shape(type::float32, {out}), seed + 1));
    return m.add_instruction(make_op("convolution", {{"padding", arr({1, 1, 1, 1})}, {"stride", arr({stride, stride})}}),
                             {x, w, b});
}

// x[n, 3, 12, 12] -> conv -> relu -> + c[4, 1, 1] -> max pool 2x2/2 (6x6 = 36 pixels) ->
// conv stride 2 (3x3 = 9 pixels) -> relu.
program cnn(std::size_t n) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", shape(type::float32, {n, 3, 12, 12}));
    auto a = conv3x3(m, x, 3, 4, 1);
    auto r = m.add_instruction(make_op("relu"), {a});
    auto c = m.add_instruction(make_op("add"), {r, m.add_literal(random_literal(shape(type::float32, {4, 1, 1}), 3))});
    auto pool = m.add_instruction(
        make_op("pooling", {{"mode", value(std::int64_t{1})}, {"lengths", arr({2, 2})}, {"stride", arr({2, 2})},
                            {"padding", arr({0, 0, 0, 0})}, {"dilation", arr({1, 1})}}),
        {c});
    auto late = conv3x3(m, pool, 4, 5, 5, 2);
    m.add_return({m.add_instruction(make_op("relu"), {late})});
    return p;
}

}  // namespace

TEST(split_batch, runs_the_prefix_image_by_image) {
    auto after = check_same_results(cnn(3), [](module& m) { split_batch{20, 0}.apply(m); }, 0, 0);
    const auto& m = *after.get_main_module();
    // Three copies of conv, relu, add and pool; the 3x3-pixel convolution stays batched.
    EXPECT_EQ(count(m, "slice"), 3u) << m;
    EXPECT_EQ(count(m, "convolution"), 4u) << m;
    EXPECT_EQ(count(m, "pooling"), 3u) << m;
    EXPECT_EQ(count(m, "concat"), 1u) << m;
    for (const auto& ins : m) {
        if (ins.name() == "pooling") {
            EXPECT_EQ(ins.get_shape().lens()[0], 1u);
        }
        if (ins.name() == "concat") {
            EXPECT_EQ(ins.get_shape().lens(), (std::vector<std::size_t>{3, 4, 6, 6}));
        }
    }
    // The copies share the weight literals.
    EXPECT_EQ(count(m, "@literal"), 5u) << m;
}

TEST(split_batch, leaves_batch_one_small_tensors_and_few_pixels_alone) {
    for (auto [n, min_pixels, min_bytes] : {std::tuple<std::size_t, std::size_t, std::size_t>{1, 20, 0},
                                            {3, 20, 1u << 20},   // the tensors fit the caches
                                            {3, 200, 0}}) {    // the first conv has 144 pixels
        auto p = cnn(n);
        const auto before = p.get_main_module()->to_string();
        split_batch{min_pixels, min_bytes}.apply(*p.get_main_module());
        EXPECT_EQ(p.get_main_module()->to_string(), before) << n << " " << min_pixels << " " << min_bytes;
    }
}

TEST(split_batch, cuts_where_fewest_values_cross_and_keeps_later_readers) {
    // a = conv(x) is read after the prefix too (returned): the fewest values crossing the
    // cut is then one, right after a; x itself is also returned.
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", shape(type::float32, {2, 3, 12, 12}));
    auto a = conv3x3(m, x, 3, 4, 1);
    auto r = m.add_instruction(make_op("relu"), {a});
    auto late = conv3x3(m, r, 4, 2, 5, 4);  // 3x3 pixels: ends the prefix
    m.add_return({late, a, x});
    auto after = check_same_results(p, [](module& mm) { split_batch{20, 0}.apply(mm); }, 0, 0);
    const auto& am = *after.get_main_module();
    EXPECT_EQ(count(am, "concat"), 1u) << am;
    EXPECT_EQ(count(am, "convolution"), 3u) << am;  // a per image, late batched
    EXPECT_EQ(count(am, "relu"), 1u) << am;           // after the cut: reads the concat
}

TEST(split_batch, stops_at_an_op_that_mixes_images) {
    // A reduction over the batch first: nothing before it to split.
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", shape(type::float32, {2, 3, 12, 12}));
    auto s = m.add_instruction(make_op("reduce_sum", {{"axes", arr({0})}, {"keepdims", value(true)}}), {x});
    auto y = m.add_instruction(make_op("add"), {x, s});
    m.add_return({conv3x3(m, y, 3, 4, 1)});
    const auto before = m.to_string();
    split_batch{20, 0}.apply(m);
    EXPECT_EQ(m.to_string(), before);
}

TEST(merge_literals, equal_constants_become_one) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", shape(type::float32, {2, 3}));
    auto v = random_literal(shape(type::float32, {2, 3}), 9);
    auto a = m.add_instruction(make_op("add"), {x, m.add_literal(v)});
    auto b = m.add_instruction(make_op("add"), {a, m.add_literal(v)});
    auto c = m.add_instruction(make_op("add"), {b, m.add_literal(random_literal(shape(type::float32, {2, 3}), 10))});
    // Same bytes, another shape: kept apart.
    auto d = m.add_instruction(make_op("add"), {c, m.add_instruction(make_op("reshape", {{"dims", arr({2, 3})}}),
                                                                    {m.add_literal(literal(shape(type::float32, {6}),
                                                                                           v.to_vector<float>()))})});
    m.add_return({d});
    auto after = check_same_results(p, [](module& mm) { merge_literals{}.apply(mm); }, 0, 0);
    std::size_t used = 0;
    for (const auto& ins : *after.get_main_module()) used += ins.is_literal() && !ins.outputs().empty() ? 1 : 0;
    EXPECT_EQ(used, 3u) << *after.get_main_module();
}

TEST(split_batch, leaves_convolutions_with_computed_weights_alone) {
    // Weights that are an input (not constants the copies could share): nothing to split.
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", shape(type::float32, {2, 3, 12, 12}));
    auto w = m.add_parameter("w", shape(type::float32, {2, 3, 3, 3}));  // dim 0 = the batch
    auto y = m.add_instruction(make_op("convolution", {{"padding", arr({1, 1, 1, 1})}}), {x, w});
    m.add_return({m.add_instruction(make_op("relu"), {y})});
    const auto before = m.to_string();
    split_batch{20, 0}.apply(m);
    EXPECT_EQ(m.to_string(), before);
}
