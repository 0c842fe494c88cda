// Unit tests of compile_options::dynamic_buckets (src/core/dynamic_padding.cpp): which
// programs keep a dim's rows apart, and a call between two buckets run on the larger one's
// program, padded and cut back, with the results of an unpadded run.
#include "core/dynamic_padding.hpp"
#include "specialization_gate.hpp"

#include <kiln/program.hpp>
#include <kiln/register_op.hpp>
#include <kiln/serialize.hpp>
#include <kiln/target.hpp>

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::test::spec;

namespace {

dynamic_dimension named(std::size_t lo, std::size_t hi, const std::string& name) {
    dynamic_dimension d{lo, hi, {}};
    d.symbol = name;
    return d;
}

// 3x through pointwise adds: x + x + x, rows named "n".
program tripled_rows(std::size_t cols) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {named(0, 64, "n"), {cols, cols, {}}}));
    auto twice = m->add_instruction(make_op("add"), {x, x});
    m->add_return({m->add_instruction(make_op("add"), {twice, x})});
    return p;
}

compile_options with_buckets(std::vector<std::size_t> sizes) {
    compile_options o;
    o.dynamic_buckets = {dim_buckets{"n", std::move(sizes)}};
    return o;
}

}  // namespace

TEST(dynamic_padding, pointwise_rows_are_row_wise) {
    auto p = tripled_rows(8);
    EXPECT_EQ(why_not_row_wise(*p.get_main_module(), "n"), std::nullopt);
    EXPECT_NE(why_not_row_wise(*p.get_main_module(), "other"), std::nullopt);  // no input has it
}

TEST(dynamic_padding, a_reduction_over_the_rows_or_a_matmul_over_them_is_not) {
    {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {named(1, 64, "n"), {8, 8, {}}}));
        m->add_return({m->add_instruction(make_op("reduce_sum", {{"axes", {0}}}), {x})});
        auto why = why_not_row_wise(*m, "n");
        ASSERT_TRUE(why.has_value());
        EXPECT_NE(why->find("reduce"), std::string::npos) << *why;
    }
    {
        // x^T x: the rows are the inner dim of the product.
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {named(1, 64, "n"), {8, 8, {}}}));
        auto xt = m->add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {x});
        m->add_return({m->add_instruction(make_op("matmul"), {xt, x})});
        EXPECT_TRUE(why_not_row_wise(*m, "n").has_value());
    }
}

// Buckets 2 and 8 are compiled ahead; 5 rows run on the 8-row program, padded, and give
// the 5 rows an unpadded run gives; above the largest bucket nothing is padded.
TEST(dynamic_padding, a_call_between_buckets_runs_padded_on_the_larger_one) {
    auto p = tripled_rows(8);
    p.compile(*get_target("ref"), with_buckets({8, 2}));
    EXPECT_EQ(p.compiled_ahead().size(), 2u);
    for (std::size_t rows : {5, 1, 8, 2, 0}) {
        auto r = p.eval({{"x", rows_of(rows, 8)}});
        if (rows > 0) expect_tripled(r[0], rows, 8);
        else EXPECT_EQ(r[0].get_shape().lens(), (std::vector<std::size_t>{0, 8}));
    }
    auto s = p.get_specialization_stats();
    EXPECT_EQ(s.padded_runs, 3u);  // 5 -> 8, 1 -> 2, 0 -> 2
    EXPECT_EQ(s.compiles, 2u);
    EXPECT_EQ(s.generic_runs, 0u);
    expect_tripled(p.eval({{"x", rows_of(9, 8)}})[0], 9, 8);
    EXPECT_EQ(p.get_specialization_stats().padded_runs, 3u);

    // The buckets survive save and load, programs and all.
    auto bytes = save_buffer(p);
    auto q = load_buffer(bytes.data(), bytes.size());
    ASSERT_EQ(q.get_compile_options().dynamic_buckets.size(), 1u);
    EXPECT_EQ(q.get_compile_options().dynamic_buckets[0].sizes, (std::vector<std::size_t>{8, 2}));
    expect_tripled(q.eval({{"x", rows_of(3, 8)}})[0], 3, 8);
    EXPECT_EQ(q.get_specialization_stats().padded_runs, 1u);
    EXPECT_EQ(q.get_specialization_stats().compiles, 0u);
}

// A program that mixes rows is never padded: its buckets are compiled ahead, the other
// sizes run as they would without buckets.
TEST(dynamic_padding, rows_that_mix_are_not_padded) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {named(1, 64, "n"), {4, 4, {}}}));
    m->add_return({m->add_instruction(make_op("reduce_sum", {{"axes", {0}}}), {x})});
    p.compile(*get_target("ref"), with_buckets({4}));
    auto r = p.eval({{"x", rows_of(3, 4)}});
    auto expected = 0.0f;
    for (std::size_t i = 0; i < 3; ++i) expected += 1.0f + static_cast<float>((i * 4) % 7);
    EXPECT_EQ(r[0].data_as<float>()[0], expected);
    EXPECT_EQ(p.get_specialization_stats().padded_runs, 0u);
}
