// The clean-up passes as before/after text (pass_text_util.hpp).
#include "pass_text_util.hpp"
#include "passes/common_subexpression_elimination.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/propagate_constants.hpp"

#include <kiln/program.hpp>

#include <gtest/gtest.h>

using namespace kiln;
using pass_text::expect_rewrite;
using pass_text::expect_unchanged;

namespace {
void dce(module& m) { dead_code_elimination{}.apply(m); }
void cse_then_dce(module& m) {
    common_subexpression_elimination{}.apply(m);
    dead_code_elimination{}.apply(m);
}
void fold_then_dce(module& m) {
    propagate_constants{}.apply(m);
    dead_code_elimination{}.apply(m);
}
}  // namespace

TEST(dead_code_elimination, removes_unused_chain) {
    expect_rewrite(R"(
        module main
          x = @param -> float32[2, 3]
          a = relu(x)
          b = neg(a)      // dead, and makes `a` dead
          @return(x)
    )", dce, R"(
        module main
          x = @param -> float32[2, 3]
          @return(x)
    )");
}

TEST(dead_code_elimination, keeps_parameters_literals_nobody_reads_go) {
    expect_rewrite(R"(
        module main
          x = @param -> float32[2]
          unused = @param -> float32[3]
          k = @literal{float32[2] {1, 2}}
          @return(x)
    )", dce, R"(
        module main
          x = @param -> float32[2]
          unused = @param -> float32[3]
          @return(x)
    )");
}

TEST(common_subexpression_elimination, merges_equal_ops) {
    expect_rewrite(R"(
        module main
          x = @param -> float32[2, 3]
          a = transpose{perm=[1, 0]}(x)
          b = transpose{perm=[1, 0]}(x)
          c = reshape{dims=[3, 2]}(x)     // different op on the same input: kept
          d = add(a, c)
          e = add(b, c)                   // same as d once b is a
          @return(d, e)
    )", cse_then_dce, R"(
        module main
          x = @param -> float32[2, 3]
          a = transpose{perm=[1, 0]}(x)
          c = reshape{dims=[3, 2]}(x)
          d = add(a, c)
          @return(d, d)
    )");
}

TEST(common_subexpression_elimination, keeps_ops_whose_attributes_differ) {
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3, 4]
          a = transpose{perm=[1, 0, 2]}(x)
          b = transpose{perm=[2, 1, 0]}(x)
          @return(a, b)
    )", cse_then_dce);
}

TEST(propagate_constants, folds_literal_chains) {
    const auto before = R"(
        module main
          x = @param -> float32[2, 3]
          k = @literal{float32[2, 3] {1.5, 1.5, 1.5, 1.5, 1.5, 1.5}}
          two = @literal{float32[] {2}}
          k2 = mul(k, two)
          k4 = add(k2, k2)      // 6 everywhere
          y = add(x, k4)
          @return(y)
    )";
    auto p = expect_rewrite(before, fold_then_dce, R"(
        module main
          x = @param -> float32[2, 3]
          k = @literal{float32[2, 3] {6, 6, 6, 6, 6, 6}}
          y = add(x, k)
          @return(y)
    )");
    auto unfolded = pass_text::parse(before);
    param_map in{{"x", literal(shape(type::float32, {2, 3}), std::vector<float>(6, 0.25f)).get_argument()}};
    EXPECT_EQ(p.eval(in)[0], unfolded.eval(in)[0]);
}
