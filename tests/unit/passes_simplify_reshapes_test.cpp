// simplify_reshapes: IR before/after and bit-identical reference results.
#include "passes/dead_code_elimination.hpp"
#include "passes/simplify_reshapes.hpp"
#include "passes_test_util.hpp"

#include "ops/tensor_views.hpp"

using namespace kiln;
using passes_test::check_same_results;

namespace {
shape f32(std::vector<std::size_t> lens) { return shape(type::float32, std::move(lens)); }
void simplify(module& m) {
    simplify_reshapes{}.apply(m);
    dead_code_elimination{}.apply(m);
}
op::reshape reshape(std::vector<std::int64_t> dims) { return op::reshape{std::move(dims), false}; }
}  // namespace

TEST(simplify_reshapes, reshape_chain_collapses_to_one_reshape) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 3, 4}));
    auto y = m.add_instruction(reshape({6, 4}), {x});
    y = m.add_instruction(op::unsqueeze{{0}}, {y});  // [1, 6, 4]
    y = m.add_instruction(op::flatten{2}, {y});      // [6, 4]
    y = m.add_instruction(reshape({4, -1}), {y});    // [4, 6]
    m.add_return({m.add_instruction(make_op("relu"), {y})});
    auto after = check_same_results(p, simplify, 0, 0);
    module expected;
    auto ex = expected.add_parameter("x", f32({2, 3, 4}));
    auto ey = expected.add_instruction(reshape({4, 6}), {ex});
    expected.add_return({expected.add_instruction(make_op("relu"), {ey})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_reshapes, chain_back_to_the_input_shape_vanishes) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 3, 4}));
    auto y = m.add_instruction(op::unsqueeze{{1, 3}}, {x});  // [2, 1, 3, 1, 4]
    y = m.add_instruction(op::squeeze{{3}}, {y});            // [2, 1, 3, 4]
    y = m.add_instruction(reshape({2, 12}), {y});
    y = m.add_instruction(reshape({2, 3, 4}), {y});
    m.add_return({m.add_instruction(make_op("relu"), {y})});
    auto after = check_same_results(p, simplify, 0, 0);
    module expected;
    auto ex = expected.add_parameter("x", f32({2, 3, 4}));
    expected.add_return({expected.add_instruction(make_op("relu"), {ex})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_reshapes, squeeze_unsqueeze_of_a_transposed_view_vanishes) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 3}));
    auto t = m.add_instruction(op::transpose{{1, 0}}, {x});
    auto y = m.add_instruction(op::unsqueeze{{0}}, {t});
    y = m.add_instruction(op::squeeze{{0}}, {y});
    m.add_return({m.add_instruction(make_op("relu"), {y})});
    auto after = check_same_results(p, simplify, 0, 0);
    module expected;
    auto ex = expected.add_parameter("x", f32({2, 3}));
    auto et = expected.add_instruction(op::transpose{{1, 0}}, {ex});
    expected.add_return({expected.add_instruction(make_op("relu"), {et})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_reshapes, reshapes_of_a_transposed_view_stay) {
    // The first reshape copies the transposed data into row-major order; one reshape of
    // the transpose would too, but replacing views with a copying op is not this pass's
    // business, so the chain stays.
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 3, 4}));
    auto t = m.add_instruction(op::transpose{{2, 0, 1}}, {x});
    auto y = m.add_instruction(reshape({4, 6}), {t});
    y = m.add_instruction(reshape({24}), {y});
    m.add_return({m.add_instruction(make_op("relu"), {y})});
    std::string before = m.to_string();
    simplify(m);
    EXPECT_EQ(m.to_string(), before);
}

TEST(simplify_reshapes, transpose_pairs_compose) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 3, 4}));
    // Inverse pair: vanishes.
    auto a = m.add_instruction(op::transpose{{1, 2, 0}}, {x});
    a = m.add_instruction(op::transpose{{2, 0, 1}}, {a});
    // Two swaps compose into one rotation: out[i] = x[p1[p2[i]]] = x[{1, 2, 0}].
    auto b = m.add_instruction(op::transpose{{1, 0, 2}}, {x});
    b = m.add_instruction(op::transpose{{0, 2, 1}}, {b});
    // Empty perm reverses: reverse(reverse(x)) = x.
    auto c = m.add_instruction(op::transpose{}, {x});
    c = m.add_instruction(op::transpose{}, {c});
    auto r = m.add_instruction(make_op("add"), {a, c});
    m.add_return({m.add_instruction(make_op("relu"), {r}), m.add_instruction(make_op("relu"), {b})});
    auto after = check_same_results(p, simplify, 0, 0);
    module expected;
    auto ex = expected.add_parameter("x", f32({2, 3, 4}));
    auto eb = expected.add_instruction(op::transpose{{1, 2, 0}}, {ex});
    auto er = expected.add_instruction(make_op("add"), {ex, ex});
    expected.add_return(
        {expected.add_instruction(make_op("relu"), {er}), expected.add_instruction(make_op("relu"), {eb})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_reshapes, transpose_of_unit_dims_becomes_a_reshape) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({1, 3, 1, 4}));
    auto a = m.add_instruction(op::transpose{{1, 0, 3, 2}}, {x});  // [3, 1, 4, 1]: 3 before 4 still
    auto b = m.add_instruction(op::transpose{{0, 3, 2, 1}}, {x});  // [1, 4, 1, 3]: moves data
    m.add_return({m.add_instruction(make_op("relu"), {a}), m.add_instruction(make_op("relu"), {b})});
    auto after = check_same_results(p, simplify, 0, 0);
    module expected;
    auto ex = expected.add_parameter("x", f32({1, 3, 1, 4}));
    auto ea = expected.add_instruction(reshape({3, 1, 4, 1}), {ex});
    auto eb = expected.add_instruction(op::transpose{{0, 3, 2, 1}}, {ex});
    expected.add_return(
        {expected.add_instruction(make_op("relu"), {ea}), expected.add_instruction(make_op("relu"), {eb})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_reshapes, zero_sized_dims) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 0, 3}));
    auto y = m.add_instruction(op::reshape{{0, 3}, true}, {x});  // allowzero: [0, 3]
    y = m.add_instruction(op::unsqueeze{{0}}, {y});              // [1, 0, 3]
    m.add_return({m.add_instruction(make_op("relu"), {y})});
    auto after = check_same_results(p, simplify, 0, 0);
    module expected;
    auto ex = expected.add_parameter("x", f32({2, 0, 3}));
    auto ey = expected.add_instruction(op::reshape{{1, 0, 3}, true}, {ex});
    expected.add_return({expected.add_instruction(make_op("relu"), {ey})});
    EXPECT_EQ(*after.get_main_module(), expected) << *after.get_main_module();
}

TEST(simplify_reshapes, gather_at_a_constant_index_becomes_a_view) {
    // q, k, v = gather(qkv, 0 / 1 / 2) of a packed projection: windows of the data, read
    // in place (slice + squeeze views), with the same values as the copying gather.
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({2, 3, 5, 4}));
    auto t = m.add_instruction(op::transpose{{1, 0, 2, 3}}, {x});  // [3, 2, 5, 4], strided
    std::vector<instruction_ref> outs;
    for (std::int64_t i : {0, 1, -1}) {
        auto idx = m.add_literal(literal(std::int64_t{i}));
        auto g = m.add_instruction(make_op("gather", {{"axis", 0}}), {t, idx});
        outs.push_back(m.add_instruction(make_op("relu"), {g}));
    }
    auto one = m.add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{2}));
    auto g1 = m.add_instruction(make_op("gather", {{"axis", -2}}), {x, one});  // keeps the axis
    outs.push_back(m.add_instruction(make_op("relu"), {g1}));
    m.add_return(outs);
    auto after = check_same_results(p, simplify, 0, 0);
    std::size_t gathers = 0, slices = 0, squeezes = 0;
    for (auto& ins : *after.get_main_module()) {
        gathers += ins.name() == "gather";
        slices += ins.name() == "slice";
        squeezes += ins.name() == "squeeze";
    }
    EXPECT_EQ(gathers, 0u) << *after.get_main_module();
    EXPECT_EQ(slices, 4u);
    EXPECT_EQ(squeezes, 3u);
}

TEST(simplify_reshapes, gather_that_is_an_output_or_out_of_range_stays) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({3, 4}));
    auto i0 = m.add_literal(literal(std::int64_t{1}));
    auto bad = m.add_literal(literal(std::int64_t{7}));
    auto g = m.add_instruction(make_op("gather", {{"axis", 0}}), {x, i0});
    auto h = m.add_instruction(make_op("gather", {{"axis", 0}}), {x, bad});
    m.add_return({g, m.add_instruction(make_op("relu"), {h})});
    std::string before = m.to_string();
    simplify(m);
    EXPECT_EQ(m.to_string(), before);
}
