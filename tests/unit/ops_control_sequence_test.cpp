// Sequence and optional ops on random data, against direct computations.
#include "ops/control_sequence.hpp"
#include "ops/control_shapes.hpp"

#include <kiln/context.hpp>
#include <kiln/operation.hpp>

#include <gtest/gtest.h>

#include <random>

using namespace kiln;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(0.5f, 3.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = d(gen);
    return v;
}

argument floats(const std::vector<std::size_t>& lens, const std::vector<float>& v) {
    return literal(shape(type::float32, lens), v).get_argument();
}
argument int64(std::int64_t v) { return literal(shape(type::int64), std::vector<std::int64_t>{v}).get_argument(); }

// Shape inference, then compute, as the evaluator does.
argument run(const operation& op, const std::vector<argument>& args) {
    std::vector<shape> shapes;
    for (auto& a : args) shapes.push_back(a.get_shape());
    host_context ctx;
    return op.compute(ctx, op.compute_shape(shapes), args);
}

}  // namespace

TEST(ops_control_sequence, construct_insert_at_erase_length) {
    auto a = random_floats(6, 1), b = random_floats(6, 2), c = random_floats(4, 3);
    auto seq = run(op::sequence_construct{}, {floats({2, 3}, a), floats({2, 3}, b)});
    ASSERT_TRUE(seq.get_shape().is_sequence());
    EXPECT_EQ(seq.get_shape().sub_shapes()[0], shape(type::float32, {2, 3}));
    seq = run(op::sequence_insert{}, {seq, floats({2, 2}, c), int64(-1)});  // before the last
    ASSERT_EQ(seq.elements().size(), 3u);
    EXPECT_EQ(seq.elements()[1].to_vector<float>(), c);
    EXPECT_TRUE(seq.get_shape().sub_shapes()[0].dynamic());  // items differ in shape now
    EXPECT_EQ(run(op::sequence_at{}, {seq, int64(-1)}).to_vector<float>(), b);
    EXPECT_EQ(run(op::sequence_at{}, {seq, int64(0)}).to_vector<float>(), a);
    EXPECT_EQ(run(op::sequence_length{}, {seq}).get_int64(0), 3);
    auto erased = run(op::sequence_erase{}, {seq, int64(0)});
    ASSERT_EQ(erased.elements().size(), 2u);
    EXPECT_EQ(erased.elements()[0].to_vector<float>(), c);
    erased = run(op::sequence_erase{}, {erased});  // the last
    ASSERT_EQ(erased.elements().size(), 1u);
    // The input sequence is unchanged (values are immutable).
    EXPECT_EQ(seq.elements().size(), 3u);
}

TEST(ops_control_sequence, positions_out_of_range_are_errors) {
    auto seq = run(op::sequence_construct{}, {floats({2}, {1, 2})});
    EXPECT_THROW(run(op::sequence_at{}, {seq, int64(1)}), error);
    EXPECT_THROW(run(op::sequence_at{}, {seq, int64(-2)}), error);
    EXPECT_THROW(run(op::sequence_insert{}, {seq, floats({2}, {3, 4}), int64(3)}), error);
    auto empty = run(op::sequence_empty{type::float32}, {});
    EXPECT_EQ(empty.elements().size(), 0u);
    EXPECT_THROW(run(op::sequence_erase{}, {empty}), error);
    // Types must agree.
    EXPECT_THROW(run(op::sequence_insert{}, {seq, literal(shape(type::int32, {2}), std::vector<int>{1, 2}).get_argument()}),
                 error);
}

TEST(ops_control_sequence, empty_takes_the_shape_of_what_is_inserted) {
    auto empty = run(op::sequence_empty{type::float32}, {});
    auto s = op::sequence_insert{}.compute_shape({empty.get_shape(), shape(type::float32, {3, 5})});
    EXPECT_EQ(s, shape::sequence(shape(type::float32, {3, 5})));
}

TEST(ops_control_sequence, split_to_sequence_and_concat_back) {
    auto x = random_floats(5 * 3, 4);
    auto xa = floats({5, 3}, x);
    // Sizes 2, 3 along axis 0.
    op::split_to_sequence s;
    s.has_split = true;
    s.split = {2, 3};
    auto seq = run(s, {xa});
    ASSERT_EQ(seq.elements().size(), 2u);
    EXPECT_EQ(seq.elements()[0].get_shape().lens(), (std::vector<std::size_t>{2, 3}));
    EXPECT_EQ(seq.elements()[1].to_vector<float>(), std::vector<float>(x.begin() + 6, x.end()));
    EXPECT_EQ(run(op::concat_from_sequence{0, false}, {seq}).to_vector<float>(), x);
    // A scalar chunk size along axis 1: pieces 2 and 1.
    op::split_to_sequence c;
    c.axis = 1;
    auto seq2 = run(c, {xa, literal(shape(type::int64), std::vector<std::int64_t>{2}).get_argument()});
    ASSERT_EQ(seq2.elements().size(), 2u);
    EXPECT_EQ(seq2.elements()[1].get_shape().lens(), (std::vector<std::size_t>{5, 1}));
    for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(seq2.elements()[1].to_vector<float>()[i], x[i * 3 + 2]);
    EXPECT_EQ(run(op::concat_from_sequence{-1, false}, {seq2}).to_vector<float>(), x);
    // No split, keepdims 0: rows, squeezed; stacking them again gives x.
    op::split_to_sequence r;
    r.keepdims = false;
    auto rows = run(r, {xa});
    ASSERT_EQ(rows.elements().size(), 5u);
    EXPECT_EQ(rows.elements()[2].get_shape().lens(), (std::vector<std::size_t>{3}));
    auto stacked = run(op::concat_from_sequence{0, true}, {rows});
    EXPECT_EQ(stacked.get_shape().lens(), (std::vector<std::size_t>{5, 3}));
    EXPECT_EQ(stacked.to_vector<float>(), x);
    auto stacked1 = run(op::concat_from_sequence{1, true}, {rows});
    EXPECT_EQ(stacked1.get_shape().lens(), (std::vector<std::size_t>{3, 5}));
    EXPECT_EQ(stacked1.to_vector<float>()[1], x[3]);
    // Sizes that do not add up.
    s.split = {2, 2};
    EXPECT_THROW(run(s, {xa}), error);
}

TEST(ops_control_sequence, strings_in_sequences) {
    auto a = literal(shape(type::string, {2}), std::vector<std::string>{"ab", "c"}).get_argument();
    auto seq = run(op::sequence_construct{}, {a, a});
    auto cat = run(op::concat_from_sequence{0, false}, {seq});
    EXPECT_EQ(cat.to_vector<std::string>(), (std::vector<std::string>{"ab", "c", "ab", "c"}));
}

TEST(ops_control_sequence, optionals) {
    auto x = floats({3}, random_floats(3, 5));
    auto some = run(op::make_optional{}, {x});
    ASSERT_TRUE(some.get_shape().is_optional());
    EXPECT_TRUE(run(op::optional_has_element{}, {some}).get_double(0) != 0);
    EXPECT_EQ(run(op::optional_get_element{}, {some}), x);
    auto none = run(op::make_optional{shape(type::float32, {3})}, {});
    EXPECT_FALSE(run(op::optional_has_element{}, {none}).get_double(0) != 0);
    EXPECT_THROW(run(op::optional_get_element{}, {none}), error);
    // Plain tensors count as present and pass through.
    EXPECT_TRUE(run(op::optional_has_element{}, {x}).get_double(0) != 0);
    EXPECT_EQ(run(op::optional_get_element{}, {x}), x);
}
