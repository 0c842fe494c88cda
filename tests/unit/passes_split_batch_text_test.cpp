// split_batch as before/after text (pass_text_util.hpp): the separable prefix of a batched
// CNN copied once per image on a batch-1 slice of x, joined by a concatenation on axis 0
// where the fewest values cross the cut. Each rewrite is also run on random data before
// and after (bitwise: every image sees the same arithmetic).
#include "pass_text_util.hpp"
#include "passes/split_batch.hpp"
#include "passes_test_util.hpp"

using namespace kiln;
using pass_text::literal_map;
using passes_test::random_literal;

namespace {

shape f32(std::vector<std::size_t> lens) { return shape(type::float32, std::move(lens)); }

// The weights the texts name.
literal_map weights() {
    return {{"w", random_literal(f32({4, 3, 3, 3}), 1)},
            {"b", random_literal(f32({4}), 2)},
            {"k", random_literal(f32({4, 1, 1}), 3)},
            {"kb", random_literal(f32({2, 1, 1, 1}), 4)},
            {"w2", random_literal(f32({2, 4, 3, 3}), 5)}};
}

// Convolutions of fewer than 20 output pixels per image end the prefix; any size counts.
void split(module& m) { split_batch{20, 0}.apply(m); }

void expect_split(std::string_view before, std::string_view after) {
    auto l = weights();
    auto q = passes_test::check_same_results(pass_text::parse(before, l), split, 0, 0);
    EXPECT_TRUE(pass_text::module_matches(*q.get_main_module(), after, l));
}

void expect_unchanged(std::string_view text, const pass_text::pass_fn& pass = split) {
    pass_text::expect_unchanged(text, pass, weights());
}

}  // namespace

TEST(split_batch_text, convolution_pointwise_and_pooling_run_image_by_image) {
    // conv (64 pixels per image), relu, + k (the same for every image) and a max pool
    // are separable: the whole module is the prefix, and its one result is the cut.
    expect_split(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          c = convolution{padding=[1, 1, 1, 1]}(x, w, b)
          r = relu(c)
          k = @literal{float32[4, 1, 1] {...}}
          a = add(r, k)
          p = pooling{lengths=[2, 2], stride=[2, 2]}(a)
          @return(p)
    )", R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          k = @literal{float32[4, 1, 1] {...}}
          x0 = slice{axes=[0], starts=[0], ends=[1]}(x)
          c0 = convolution{padding=[1, 1, 1, 1]}(x0, w, b)
          r0 = relu(c0)
          a0 = add(r0, k)
          p0 = pooling{lengths=[2, 2], stride=[2, 2]}(a0)
          x1 = slice{axes=[0], starts=[1], ends=[2]}(x)
          c1 = convolution{padding=[1, 1, 1, 1]}(x1, w, b)
          r1 = relu(c1)
          a1 = add(r1, k)
          p1 = pooling{lengths=[2, 2], stride=[2, 2]}(a1)
          p = concat{axis=0}(p0, p1)
          @return(p)
    )");
}

TEST(split_batch_text, cuts_where_fewest_values_cross) {
    // late has 2x2 pixels per image: it ends the prefix [c, r]. Cutting after r, both c
    // (returned) and r would cross; after c only c does: one concatenation, and relu
    // reads it.
    expect_split(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          c = convolution{padding=[1, 1, 1, 1]}(x, w, b)
          r = relu(c)
          w2 = @literal{float32[2, 4, 3, 3] {...}}
          late = convolution{padding=[1, 1, 1, 1], stride=[4, 4]}(r, w2)
          @return(late, c)
    )", R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          x0 = slice{axes=[0], starts=[0], ends=[1]}(x)
          c0 = convolution{padding=[1, 1, 1, 1]}(x0, w, b)
          x1 = slice{axes=[0], starts=[1], ends=[2]}(x)
          c1 = convolution{padding=[1, 1, 1, 1]}(x1, w, b)
          c = concat{axis=0}(c0, c1)
          r = relu(c)
          w2 = @literal{float32[2, 4, 3, 3] {...}}
          late = convolution{padding=[1, 1, 1, 1], stride=[4, 4]}(r, w2)
          @return(late, c)
    )");
}

TEST(split_batch_text, a_constant_that_varies_along_the_batch_ends_the_prefix) {
    // kb has one value per image: the copies could not share it, so the add stays batched.
    expect_split(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          c = convolution{padding=[1, 1, 1, 1]}(x, w, b)
          kb = @literal{float32[2, 1, 1, 1] {...}}
          a = add(c, kb)
          @return(a)
    )", R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          x0 = slice{axes=[0], starts=[0], ends=[1]}(x)
          c0 = convolution{padding=[1, 1, 1, 1]}(x0, w, b)
          x1 = slice{axes=[0], starts=[1], ends=[2]}(x)
          c1 = convolution{padding=[1, 1, 1, 1]}(x1, w, b)
          c = concat{axis=0}(c0, c1)
          kb = @literal{float32[2, 1, 1, 1] {...}}
          a = add(c, kb)
          @return(a)
    )");
}

TEST(split_batch_text, concatenations_along_channels_are_copied_along_the_batch_not) {
    // concat on axis 1 is separable (one per image); on axis -4 (the batch) it is not.
    expect_split(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          c = convolution{padding=[1, 1, 1, 1]}(x, w, b)
          r = relu(c)
          j = concat{axis=1}(c, r)
          @return(j)
    )", R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          x0 = slice{axes=[0], starts=[0], ends=[1]}(x)
          c0 = convolution{padding=[1, 1, 1, 1]}(x0, w, b)
          r0 = relu(c0)
          j0 = concat{axis=1}(c0, r0)
          x1 = slice{axes=[0], starts=[1], ends=[2]}(x)
          c1 = convolution{padding=[1, 1, 1, 1]}(x1, w, b)
          r1 = relu(c1)
          j1 = concat{axis=1}(c1, r1)
          j = concat{axis=0}(j0, j1)
          @return(j)
    )");
    expect_split(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          c = convolution{padding=[1, 1, 1, 1]}(x, w, b)
          r = relu(c)
          j = concat{axis=-4}(c, r)
          @return(j)
    )", R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          x0 = slice{axes=[0], starts=[0], ends=[1]}(x)
          c0 = convolution{padding=[1, 1, 1, 1]}(x0, w, b)
          x1 = slice{axes=[0], starts=[1], ends=[2]}(x)
          c1 = convolution{padding=[1, 1, 1, 1]}(x1, w, b)
          c = concat{axis=0}(c0, c1)
          r = relu(c)
          j = concat{axis=-4}(c, r)
          @return(j)
    )");
}

namespace {
constexpr const char* conv_relu = R"(
    module main
      x = @param -> float32[2, 3, 8, 8]
      w = @literal{float32[4, 3, 3, 3] {...}}
      b = @literal{float32[4] {...}}
      c = convolution{padding=[1, 1, 1, 1]}(x, w, b)
      r = relu(c)
      @return(r)
)";
}  // namespace

TEST(split_batch_text, small_batches_tensors_and_images_stay_whole) {
    // The default thresholds: at most 2 KiB per tensor here, far below 2 MiB.
    expect_unchanged(conv_relu, [](module& m) { split_batch{}.apply(m); });
    // 64 output pixels per image, below a threshold of 100.
    expect_unchanged(conv_relu, [](module& m) { split_batch{100, 0}.apply(m); });
    // Batch 1.
    expect_unchanged(R"(
        module main
          x = @param -> float32[1, 3, 8, 8]
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          c = convolution{padding=[1, 1, 1, 1]}(x, w, b)
          r = relu(c)
          @return(r)
    )");
}

TEST(split_batch_text, no_split_without_a_convolution_with_constant_weights_first) {
    // No convolution in the prefix (relu and pooling only).
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          r = relu(x)
          p = pooling{lengths=[2, 2], stride=[2, 2]}(r)
          @return(p)
    )");
    // Weights that are an input: the copies could not share them.
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          w = @param -> float32[4, 3, 3, 3]
          c = convolution{padding=[1, 1, 1, 1]}(x, w)
          r = relu(c)
          @return(r)
    )");
    // A reduction over the batch first mixes the images: the prefix is empty.
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3, 8, 8]
          s = reduce_sum{axes=[0]}(x)
          y = add(x, s)
          w = @literal{float32[4, 3, 3, 3] {...}}
          b = @literal{float32[4] {...}}
          c = convolution{padding=[1, 1, 1, 1]}(y, w, b)
          @return(c)
    )");
}
