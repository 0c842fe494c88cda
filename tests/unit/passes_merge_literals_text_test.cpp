// merge_literals as before/after text (pass_text_util.hpp): literals with the same shape
// and bytes become the first of them; the others lose their readers and stay for
// dead-code elimination (run after it in the cpu pipeline).
#include "pass_text_util.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/merge_literals.hpp"
#include "passes_test_util.hpp"

using namespace kiln;
using pass_text::expect_rewrite;
using pass_text::expect_unchanged;

namespace {

void merge(module& m) { merge_literals{}.apply(m); }
void merge_then_dce(module& m) {
    merge_literals{}.apply(m);
    dead_code_elimination{}.apply(m);
}

}  // namespace

TEST(merge_literals_text, equal_literals_become_the_first) {
    // b and d equal a; c differs in one value. The merged-away literals stay, unread.
    auto p = expect_rewrite(R"(
        module main
          x = @param -> float32[2, 2]
          a = @literal{float32[2, 2] {1, 2, 3, 4}}
          s = add(x, a)
          b = @literal{float32[2, 2] {1, 2, 3, 4}}
          t = mul(s, b)
          c = @literal{float32[2, 2] {1, 2, 3, 5}}
          u = sub(t, c)
          d = @literal{float32[2, 2] {1, 2, 3, 4}}
          v = div(u, d)
          @return(v)
    )", merge, R"(
        module main
          x = @param -> float32[2, 2]
          a = @literal{float32[2, 2] {1, 2, 3, 4}}
          s = add(x, a)
          b = @literal{float32[2, 2] {1, 2, 3, 4}}
          t = mul(s, a)
          c = @literal{float32[2, 2] {1, 2, 3, 5}}
          u = sub(t, c)
          d = @literal{float32[2, 2] {1, 2, 3, 4}}
          v = div(u, a)
          @return(v)
    )");
    // And the same numbers as before.
    passes_test::check_same_results(pass_text::parse(R"(
        module main
          x = @param -> float32[2, 2]
          a = @literal{float32[2, 2] {1, 2, 3, 4}}
          s = add(x, a)
          b = @literal{float32[2, 2] {1, 2, 3, 4}}
          t = mul(s, b)
          @return(t)
    )"), merge_then_dce, 0, 0);
}

TEST(merge_literals_text, a_literal_read_twice_and_returned_merges_everywhere) {
    expect_rewrite(R"(
        module main
          x = @param -> int32[3]
          a = @literal{int32[3] {7, 8, 9}}
          s = add(x, a)
          b = @literal{int32[3] {7, 8, 9}}
          t = mul(s, b)
          u = sub(t, b)
          @return(u, b)
    )", merge_then_dce, R"(
        module main
          x = @param -> int32[3]
          a = @literal{int32[3] {7, 8, 9}}
          s = add(x, a)
          t = mul(s, a)
          u = sub(t, a)
          @return(u, a)
    )");
}

TEST(merge_literals_text, same_bytes_in_another_shape_or_type_stay_apart) {
    // float32[4] and float32[2, 2] hold the same bytes; so do int32 1065353216 and
    // float32 1 (0x3f800000; target_type 11 is float32). Shapes differ: nothing merges.
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 2]
          a = @literal{float32[2, 2] {1, 2, 3, 4}}
          s = add(x, a)
          b = @literal{float32[4] {1, 2, 3, 4}}
          r = reshape{dims=[2, 2]}(b)
          t = mul(s, r)
          i = @literal{int32[1] {1065353216}}
          f = @literal{float32[1] {1}}
          c = convert{target_type=11}(i)
          u = add(t, c)
          v = add(u, f)
          @return(v)
    )", merge);
}

TEST(merge_literals_text, equal_numbers_with_other_bytes_stay_apart) {
    // -0 == +0 as numbers but not as bytes: a literal of -0 must stay -0 (x + -0 keeps
    // the sign of a -0 input, x + 0 does not).
    expect_unchanged(R"(
        module main
          x = @param -> float32[2]
          a = @literal{float32[2] {0, 1}}
          s = add(x, a)
          b = @literal{float32[2] {-0, 1}}
          t = add(s, b)
          @return(t)
    )", merge);
}

TEST(merge_literals_text, unread_literals_and_a_module_without_duplicates_stay) {
    // An unread literal is neither merged nor merged into: the first has no reader here,
    // so the second, the one that is read, stays as it is.
    expect_unchanged(R"(
        module main
          x = @param -> float32[2]
          a = @literal{float32[2] {1, 2}}
          b = @literal{float32[2] {1, 2}}
          s = add(x, b)
          @return(s)
    )", merge);
    // The second has no reader: nothing to redirect (DCE drops it).
    expect_unchanged(R"(
        module main
          x = @param -> float32[2]
          a = @literal{float32[2] {1, 2}}
          s = add(x, a)
          b = @literal{float32[2] {1, 2}}
          @return(s)
    )", merge);
    expect_unchanged(R"(
        module main
          x = @param -> float32[2]
          a = @literal{float32[2] {1, 2}}
          s = add(x, a)
          b = @literal{float32[2] {2, 1}}
          t = add(s, b)
          @return(t)
    )", merge);
}
