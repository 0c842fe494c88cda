#include "passes/common_subexpression_elimination.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/propagate_constants.hpp"
#include "test_ops.hpp"

#include <kiln/program.hpp>

#include <gtest/gtest.h>

using namespace kiln;

namespace {
shape s23() { return shape(type::float32, {2, 3}); }
literal lit(float v) { return literal(s23(), std::vector<float>(6, v)); }
}  // namespace

TEST(dead_code_elimination, removes_unused_chain) {
    module m;
    auto x = m.add_parameter("x", s23());
    auto a = m.add_instruction(test::test_scale{2}, {x});
    m.add_instruction(test::test_scale{3}, {a});  // dead, and makes `a` dead
    m.add_return({x});
    dead_code_elimination{}.apply(m);
    module expected;
    auto ex = expected.add_parameter("x", s23());
    expected.add_return({ex});
    EXPECT_EQ(m, expected);
}

TEST(common_subexpression_elimination, merges_equal_ops) {
    module m;
    auto x = m.add_parameter("x", s23());
    auto a = m.add_instruction(test::test_scale{2}, {x});
    auto b = m.add_instruction(test::test_scale{2}, {x});
    auto c = m.add_instruction(test::test_scale{5}, {x});  // different attribute: kept
    auto d = m.add_instruction(test::test_add{}, {a, c});
    auto e = m.add_instruction(test::test_add{}, {b, c});  // same as d once b -> a
    m.add_return({d, e});
    common_subexpression_elimination{}.apply(m);
    dead_code_elimination{}.apply(m);
    module expected;
    auto ex = expected.add_parameter("x", s23());
    auto ea = expected.add_instruction(test::test_scale{2}, {ex});
    auto ec = expected.add_instruction(test::test_scale{5}, {ex});
    auto ed = expected.add_instruction(test::test_add{}, {ea, ec});
    expected.add_return({ed, ed});
    EXPECT_EQ(m, expected) << m;
}

TEST(propagate_constants, folds_literal_chains) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", s23());
    auto k = m.add_instruction(test::test_scale{2}, {m.add_literal(lit(1.5f))});
    auto k2 = m.add_instruction(test::test_add{}, {k, k});  // 6.0 everywhere
    auto y = m.add_instruction(test::test_add{}, {x, k2});
    m.add_return({y});
    auto before = p.eval({{"x", lit(0.25f).get_argument()}});
    propagate_constants{}.apply(m);
    dead_code_elimination{}.apply(m);
    EXPECT_EQ(m.size(), 4u) << m;  // x, the folded literal, y, return
    auto folded = std::next(m.begin());
    ASSERT_TRUE(folded->is_literal());
    EXPECT_EQ(folded->get_literal().to_vector<float>(), std::vector<float>(6, 6.0f));
    EXPECT_EQ(p.eval({{"x", lit(0.25f).get_argument()}})[0], before[0]);
}
