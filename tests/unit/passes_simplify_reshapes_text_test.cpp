// simplify_reshapes as before/after text (pass_text_util.hpp), each also run on random
// data before and after (bitwise: the pass only re-describes memory).
#include "pass_text_util.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/simplify_reshapes.hpp"
#include "passes_test_util.hpp"

using namespace kiln;

namespace {

void simplify(module& m) {
    simplify_reshapes{}.apply(m);
    dead_code_elimination{}.apply(m);
}

void expect_simplified(std::string_view before, std::string_view after) {
    auto q = passes_test::check_same_results(pass_text::parse(before), simplify, 0, 0);
    EXPECT_TRUE(pass_text::module_matches(*q.get_main_module(), after));
}

void expect_unchanged(std::string_view text) {
    pass_text::expect_unchanged(text, [](module& m) { simplify_reshapes{}.apply(m); });
}

}  // namespace

TEST(simplify_reshapes_text, reshape_flatten_squeeze_unsqueeze_chain_is_one_reshape) {
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 3, 4]
          a = reshape{dims=[6, 4]}(x)
          b = unsqueeze{axes=[0]}(a)
          c = flatten{axis=2}(b)
          d = squeeze{axes=[]}(c)
          y = relu(d)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[2, 3, 4]
          d = reshape{dims=[6, 4]}(x)
          y = relu(d)
          @return(y)
    )");
}

TEST(simplify_reshapes_text, chain_back_to_the_input_shape_vanishes) {
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 3, 4]
          a = unsqueeze{axes=[1, 3]}(x)
          b = squeeze{axes=[3]}(a)
          c = reshape{dims=[2, 12]}(b)
          d = reshape{dims=[2, 3, 4]}(c)
          y = relu(d)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[2, 3, 4]
          y = relu(x)
          @return(y)
    )");
}

TEST(simplify_reshapes_text, a_chain_that_is_the_result_vanishes_too) {
    // The @return reads the chain: it then returns x itself.
    expect_simplified(R"(
        module main
          x = @param -> float32[6]
          a = reshape{dims=[2, 3]}(x)
          b = reshape{dims=[6]}(a)
          @return(b)
    )", R"(
        module main
          x = @param -> float32[6]
          @return(x)
    )");
}

TEST(simplify_reshapes_text, one_reshape_and_reshapes_of_a_transposed_view_stay) {
    // One reshape is already one; a reshape of a transposed (strided) x copies, and
    // merging it with the next would read x in another order.
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3, 4]
          a = reshape{dims=[6, 4]}(x)
          y = relu(a)
          @return(y)
    )");
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3]
          t = transpose{perm=[1, 0]}(x)
          a = reshape{dims=[6]}(t)
          b = reshape{dims=[2, 3]}(a)
          y = relu(b)
          @return(y)
    )");
}

TEST(simplify_reshapes_text, transpose_pairs_compose) {
    // out[i] = x[p1[p2[i]]]: p1 = [1, 0, 2], p2 = [0, 2, 1] give [1, 2, 0].
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 3, 4]
          a = transpose{perm=[1, 0, 2]}(x)
          b = transpose{perm=[0, 2, 1]}(a)
          y = relu(b)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[2, 3, 4]
          b = transpose{perm=[1, 2, 0]}(x)
          y = relu(b)
          @return(y)
    )");
    // Negative and empty (reversing) permutations compose the same way, here to nothing.
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 3, 4]
          a = transpose{perm=[]}(x)
          b = transpose{perm=[-1, 1, 0]}(a)
          y = relu(b)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[2, 3, 4]
          y = relu(x)
          @return(y)
    )");
}

TEST(simplify_reshapes_text, transpose_that_moves_only_unit_dims_is_a_reshape) {
    expect_simplified(R"(
        module main
          x = @param -> float32[3, 1, 4]
          t = transpose{perm=[1, 0, 2]}(x)
          y = relu(t)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[3, 1, 4]
          t = reshape{dims=[1, 3, 4]}(x)
          y = relu(t)
          @return(y)
    )");
}

TEST(simplify_reshapes_text, transposes_that_reorder_data_stay) {
    // Two dims longer than 1 swap; and a transpose of a strided (transposed) view.
    expect_unchanged(R"(
        module main
          x = @param -> float32[3, 1, 4]
          t = transpose{perm=[2, 1, 0]}(x)
          y = relu(t)
          @return(y)
    )");
    expect_unchanged(R"(
        module main
          x = @param -> float32[3, 4]
          s = slice{axes=[1], starts=[1], ends=[2]}(x)
          t = transpose{perm=[1, 0]}(s)
          y = relu(t)
          @return(y)
    )");
}

TEST(simplify_reshapes_text, gather_at_a_constant_index_is_a_slice_view) {
    // A scalar index drops the axis (slice + squeeze); a one-element index keeps it.
    expect_simplified(R"(
        module main
          x = @param -> float32[3, 4, 5]
          i = @literal{int64[] {-2}}
          g = gather{axis=1}(x, i)
          y = relu(g)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[3, 4, 5]
          s = slice{axes=[1], starts=[2], ends=[3]}(x)
          g = squeeze{axes=[1]}(s)
          y = relu(g)
          @return(y)
    )");
    expect_simplified(R"(
        module main
          x = @param -> float32[3, 4, 5]
          i = @literal{int64[1] {1}}
          g = gather{axis=-1}(x, i)
          y = relu(g)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[3, 4, 5]
          g = slice{axes=[2], starts=[1], ends=[2]}(x)
          y = relu(g)
          @return(y)
    )");
}

TEST(simplify_reshapes_text, gathers_that_are_no_window_or_a_result_stay) {
    // Two indices; an index out of range (the gather reports it when it runs); a computed
    // index; a gather the module returns (outputs keep their own buffer).
    expect_unchanged(R"(
        module main
          x = @param -> float32[3, 4]
          i = @literal{int64[2] {0, 1}}
          g = gather{axis=0}(x, i)
          y = relu(g)
          @return(y)
    )");
    expect_unchanged(R"(
        module main
          x = @param -> float32[3, 4]
          i = @literal{int64[] {3}}
          g = gather{axis=0}(x, i)
          y = relu(g)
          @return(y)
    )");
    expect_unchanged(R"(
        module main
          x = @param -> float32[3, 4]
          i = @param -> int64[]
          g = gather{axis=0}(x, i)
          y = relu(g)
          @return(y)
    )");
    expect_unchanged(R"(
        module main
          x = @param -> float32[3, 4]
          i = @literal{int64[] {1}}
          g = gather{axis=0}(x, i)
          @return(g)
    )");
}

TEST(simplify_reshapes_text, a_generic_programs_gather_over_a_fixed_axis_is_a_slice_view) {
    // Swin's q, k, v = qkv[0], qkv[1], qkv[2] with the windows and tokens known when it runs:
    // the gathered axis has one length, so the window is the same at every size (the same
    // values at two sizes); over an axis of run-time length the gather stays.
    const std::string_view before = R"(
        module main
          x = @param -> float32[3, {windows=1:64:[4]}, 5]
          i = @literal{int64[] {-1}}
          g = gather{axis=0}(x, i)
          y = relu(g)
          j = @literal{int64[] {0}}
          h = gather{axis=1}(x, j)
          z = relu(h)
          @return(y, z)
    )";
    auto p = pass_text::parse(before);
    program after = p;
    simplify(*after.get_main_module());
    after.get_main_module()->validate();
    EXPECT_TRUE(pass_text::module_matches(*after.get_main_module(), R"(
        module main
          x = @param -> float32[3, {windows=1:64:[4]}, 5]
          s = slice{axes=[0], starts=[2], ends=[3]}(x)
          g = squeeze{axes=[0]}(s)
          y = relu(g)
          j = @literal{int64[] {0}}
          h = gather{axis=1}(x, j)
          z = relu(h)
          @return(y, z)
    )"));
    for (std::size_t n : {1, 7}) {
        const param_map in{{"x", passes_test::random_literal(shape(type::float32, {3, n, 5}), 3).get_argument()}};
        auto want = p.eval(in), got = after.eval(in);
        ASSERT_EQ(got.size(), 2u);
        for (std::size_t k = 0; k < 2; ++k) EXPECT_TRUE(got[k] == want[k]) << "output " << k;
    }
}
