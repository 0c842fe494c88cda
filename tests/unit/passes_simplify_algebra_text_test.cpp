// simplify_algebra as before/after text (pass_text_util.hpp), each also checked on random
// data against the reference results before the pass. Folds into Conv/Gemm weights name
// the weights they expect (computed here in double, as the pass does), so those compare
// whole; the batch-norm folds stay in passes_simplify_algebra_test.cpp.
#include "pass_text_util.hpp"
#include "passes/dead_code_elimination.hpp"
#include "passes/simplify_algebra.hpp"
#include "passes/simplify_algebra_rules.hpp"
#include "passes_test_util.hpp"

using namespace kiln;
using pass_text::literal_map;
using passes_test::random_literal;

namespace {

shape f32(std::vector<std::size_t> lens) { return shape(type::float32, std::move(lens)); }
literal lit(std::vector<std::size_t> lens, std::vector<double> v) { return literal(f32(std::move(lens)), v); }

void simplify(module& m) {
    simplify_algebra{true}.apply(m);
    dead_code_elimination{}.apply(m);
}
void simplify_exact(module& m) {
    simplify_algebra{false}.apply(m);
    dead_code_elimination{}.apply(m);
}

// The rewrite as text, and the same results before and after (bitwise when rtol is 0).
void expect_simplified(std::string_view before, std::string_view after, const literal_map& literals = {},
                       double rtol = 0, double atol = 0, const pass_text::pass_fn& pass = simplify) {
    auto p = pass_text::parse(before, literals);
    auto q = passes_test::check_same_results(p, pass, rtol, atol);
    EXPECT_TRUE(pass_text::module_matches(*q.get_main_module(), after, literals));
}

// w (M, ...) with each output channel's rows times s[channel].
literal scaled_rows(const literal& w, const std::vector<double>& s) {
    auto v = w.to_vector<double>();
    const std::size_t per = v.size() / s.size();
    for (std::size_t i = 0; i < v.size(); ++i) v[i] *= s[i / per];
    return literal(w.get_shape(), v);
}

}  // namespace

TEST(simplify_algebra_text, channel_scale_and_bias_fold_into_conv) {
    // conv(x, w) * s[1,4,1,1] + c[4,1,1] - 0.75 -> conv(x, w*s, c - 0.75)
    literal_map l{{"w", random_literal(f32({4, 3, 3, 3}), 51)},
                  {"s", random_literal(f32({1, 4, 1, 1}), 52)},
                  {"c", random_literal(f32({4, 1, 1}), 53)}};
    l["w_scaled"] = scaled_rows(l["w"], l["s"].to_vector<double>());
    auto c = l["c"].to_vector<double>();
    for (auto& v : c) v -= 0.75;
    l["bias"] = lit({4}, c);
    expect_simplified(R"(
        module main
          x = @param -> float32[1, 3, 5, 5]
          w = @literal{float32[4, 3, 3, 3] {...}}
          y = convolution{padding=[1, 1, 1, 1]}(x, w)
          s = @literal{float32[1, 4, 1, 1] {...}}
          scaled = mul(y, s)
          c = @literal{float32[4, 1, 1] {...}}
          biased = add(c, scaled)
          d = @literal{float32[1] {0.75}}
          shifted = sub(biased, d)
          @return(shifted)
    )", R"(
        module main
          x = @param -> float32[1, 3, 5, 5]
          w_scaled = @literal{float32[4, 3, 3, 3] {...}}
          bias = @literal{float32[4] {...}}
          y = convolution{padding=[1, 1, 1, 1]}(x, w_scaled, bias) -> float32[1, 4, 5, 5]
          @return(y)
    )", l, 1e-5, 1e-5);
}

TEST(simplify_algebra_text, gemm_bias_add_and_scalar_scale) {
    literal_map l{{"b", random_literal(f32({5, 4}), 61)}, {"d", random_literal(f32({4}), 62)}};
    l["b3"] = scaled_rows(l["b"], std::vector<double>(5, 3.0));
    expect_simplified(R"(
        module main
          a = @param -> float32[3, 5]
          b = @literal{float32[5, 4] {...}}
          y = gemm(a, b)
          three = @literal{float32[] {3}}
          z = mul(y, three)
          d = @literal{float32[4] {...}}
          r = add(z, d)
          @return(r)
    )", R"(
        module main
          a = @param -> float32[3, 5]
          b3 = @literal{float32[5, 4] {...}}
          d = @literal{float32[4] {...}}
          y = gemm(a, b3, d) -> float32[3, 4]
          @return(y)
    )", l, 1e-5, 1e-5);
}

TEST(simplify_algebra_text, constant_chains_reassociate) {
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 3]
          k = @literal{float32[3] {2, 3, 4}}
          a = mul(x, k)
          half = @literal{float32[] {0.5}}
          b = mul(half, a)           // x*[1, 1.5, 2]
          one = @literal{float32[1] {1}}
          c = add(b, one)
          three = @literal{float32[1] {3}}
          d = sub(c, three)          // + (1 - 3)
          five = @literal{float32[1] {5}}
          e = sub(d, five)           // + (-2 - 5)
          @return(e)
    )", R"(
        module main
          x = @param -> float32[2, 3]
          k = @literal{float32[3] {1, 1.5, 2}}
          a = mul(x, k)
          k2 = @literal{float32[1] {-7}}
          b = add(a, k2)
          @return(b)
    )", {}, 1e-6, 1e-6);
}

TEST(simplify_algebra_text, identities_vanish) {
    // convert's target_type is the number of type::float32.
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 3]
          ones = @literal{float32[3] {1, 1, 1}}
          a = mul(x, ones)
          one = @literal{float32[] {1}}
          b = mul(one, a)
          one_1 = @literal{float32[1] {1}}
          c = div(b, one_1)
          minus_zero = @literal{float32[1] {-0}}
          d = add(c, minus_zero)
          zeros = @literal{float32[2, 1] {0, 0}}
          e = sub(d, zeros)
          f = reshape{dims=[2, 3]}(e)
          g = transpose{perm=[0, 1]}(f)
          h = convert{target_type=11}(g)
          i = broadcast{dims=[2, 3]}(h)
          j = relu(i)
          @return(j)
    )", R"(
        module main
          x = @param -> float32[2, 3]
          y = relu(x)
          @return(y)
    )", {}, 0, 0, simplify_exact);
}

TEST(simplify_algebra_text, chain_kept_when_inner_result_is_shared) {
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[2, 3]
          two = @literal{float32[1] {2}}
          a = mul(x, two)
          three = @literal{float32[1] {3}}
          b = mul(a, three)
          @return(a, b)
    )", simplify);
}

TEST(simplify_algebra_text, batch_norm_kept_when_weights_are_not_constant) {
    literal_map l{{"scale", random_literal(f32({4}), 5)}, {"bias", random_literal(f32({4}), 6)},
                  {"mean", random_literal(f32({4}), 7)}, {"var", passes_test::positive_literal(f32({4}), 8)}};
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[1, 3, 5, 5]
          w = @param -> float32[4, 3, 3, 3]
          c = convolution{padding=[1, 1, 1, 1]}(x, w)
          scale = @literal{float32[4] {...}}
          bias = @literal{float32[4] {...}}
          mean = @literal{float32[4] {...}}
          var = @literal{float32[4] {...}}
          y = batch_norm_inference{epsilon=0.001}(c, scale, bias, mean, var)
          @return(y)
    )", simplify, l);
}

TEST(simplify_algebra_text, bias_varying_over_space_is_not_folded) {
    literal_map l{{"w", random_literal(f32({4, 3, 3, 3}), 1)}, {"b", random_literal(f32({5, 5}), 2)}};
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[1, 3, 5, 5]
          w = @literal{float32[4, 3, 3, 3] {...}}
          y = convolution{padding=[1, 1, 1, 1]}(x, w)
          b = @literal{float32[5, 5] {...}}
          r = add(y, b)
          @return(r)
    )", simplify, l);
}

TEST(simplify_algebra_text, scale_of_a_matmul_operand_with_other_users_stays) {
    pass_text::expect_unchanged(R"(
        module main
          q = @param -> float32[5, 4]
          k = @param -> float32[4, 6]
          half = @literal{float32[1] {0.5}}
          qs = mul(q, half)
          y = matmul(qs, k)
          r = relu(qs)
          @return(y, r)
    )", simplify);
}

TEST(simplify_algebra_text, pad_of_zeros_is_removed) {
    // DenseNet's transitions: Pad by zeros before the average pooling.
    expect_simplified(R"(
        module main
          x = @param -> float32[1, 4, 6, 6]
          p = pad{pads=[0, 0, 0, 0, 0, 0, 0, 0]}(x)
          y = relu(p)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[1, 4, 6, 6]
          y = relu(x)
          @return(y)
    )", {}, 0, 0, simplify_exact);
}

TEST(simplify_algebra_text, zero_pad_folds_into_convolution_padding) {
    literal_map l{{"w", random_literal(f32({4, 3, 3, 3}), 61)}};
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 3, 6, 7]
          p = pad{pads=[0, 0, 1, 2, 0, 0, 1, 0]}(x)
          w = @literal{float32[4, 3, 3, 3] {...}}
          y = convolution{padding=[1, 1, 1, 1], stride=[2, 1]}(p, w)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[2, 3, 6, 7]
          w = @literal{float32[4, 3, 3, 3] {...}}
          y = convolution{padding=[2, 3, 2, 1], stride=[2, 1]}(x, w)
          @return(y)
    )", l, 0, 0, simplify_exact);
}

TEST(simplify_algebra_text, zero_pad_folds_into_average_pooling_that_counts_it) {
    // MaxViT: PyTorch's AvgPool2d(3, 2, padding=1) exported as Pad + AveragePool.
    expect_simplified(R"(
        module main
          x = @param -> float32[1, 5, 7, 8]
          zero = @literal{float32[1] {0}}
          p = pad{pads=[0, 0, 1, 1, 0, 0, 1, 1]}(x, zero)
          y = pooling{mode=0, lengths=[3, 3], stride=[2, 2]}(p)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[1, 5, 7, 8]
          y = pooling{mode=0, lengths=[3, 3], stride=[2, 2], padding=[1, 1, 1, 1], count_include_pad=1}(x)
          @return(y)
    )", {}, 1e-6, 1e-6, simplify_exact);
}

TEST(simplify_algebra_text, zero_pads_go_in_generic_programs_too) {
    // The Pad rules hold at any size, so a generic program (a dynamic batch and width) loses
    // DenseNet's zero Pad and MaxViT's Pad before its average pooling; the same results at
    // two sizes.
    const std::string_view before = R"(
        module main
          x = @param -> float32[{batch=1:8:[1]}, 4, 6, {w=3:64:[8]}]
          p = pad{pads=[0, 0, 0, 0, 0, 0, 0, 0]}(x)
          r = relu(p)
          zero = @literal{float32[1] {0}}
          q = pad{pads=[0, 0, 1, 1, 0, 0, 1, 1]}(x, zero)
          y = pooling{mode=0, lengths=[3, 3], stride=[2, 2]}(q)
          @return(r, y)
    )";
    auto p = pass_text::parse(before);
    program after = p;
    simplify_exact(*after.get_main_module());
    after.get_main_module()->validate();
    EXPECT_TRUE(pass_text::module_matches(*after.get_main_module(), R"(
        module main
          x = @param -> float32[{batch=1:8:[1]}, 4, 6, {w=3:64:[8]}]
          r = relu(x)
          y = pooling{mode=0, lengths=[3, 3], stride=[2, 2], padding=[1, 1, 1, 1], count_include_pad=1}(x)
          @return(r, y)
    )"));
    for (std::size_t n : {1, 3}) {
        const param_map in{{"x", random_literal(f32({n, 4, 6, 5 + n}), 17).get_argument()}};
        auto want = p.eval(in), got = after.eval(in);
        ASSERT_EQ(want.size(), 2u);
        ASSERT_EQ(got.size(), 2u);
        for (std::size_t k = 0; k < 2; ++k) passes_test::expect_close(got[k], want[k], 1e-6, 1e-6);
    }
}

TEST(simplify_algebra_text, pads_that_are_not_a_windows_own_padding_stay) {
    // A non-zero fill, a max pooling (it pads with -inf), the channel axis, an average
    // pooling that pads without counting it, and ceil_mode.
    literal_map l{{"w", random_literal(f32({4, 3, 3, 3}), 62)}, {"w4", random_literal(f32({4, 4, 1, 1}), 63)}};
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[1, 3, 6, 6]
          one = @literal{float32[1] {1}}
          p1 = pad{pads=[0, 0, 1, 1, 0, 0, 1, 1]}(x, one)
          w = @literal{float32[4, 3, 3, 3] {...}}
          y1 = convolution(p1, w)
          p2 = pad{pads=[0, 0, 1, 1, 0, 0, 1, 1]}(x)
          y2 = pooling{mode=1, lengths=[3, 3]}(p2)
          p3 = pad{pads=[0, 1, 0, 0, 0, 0, 0, 0]}(x)
          w4 = @literal{float32[4, 4, 1, 1] {...}}
          y3 = convolution(p3, w4)
          y4 = pooling{mode=0, lengths=[3, 3], padding=[1, 1, 1, 1]}(p2)
          y5 = pooling{mode=0, lengths=[2, 2], stride=[2, 2], ceil_mode=1}(p2)
          @return(y1, y2, y3, y4, y5)
    )", simplify, l);
}

TEST(simplify_algebra_text, channel_shuffle_halves_become_gathers) {
    // ShuffleNet: reshape to [N, g, C/g, H, W], swap the channel axes, reshape back, split.
    expect_simplified(R"(
        module main
          x = @param -> float32[2, 6, 2, 3]
          r = reshape{dims=[2, 2, 3, 2, 3]}(x)
          t = transpose{perm=[0, 2, 1, 3, 4]}(r)
          s = reshape{dims=[2, 6, 2, 3]}(t)
          a = slice{axes=[1], starts=[0], ends=[3]}(s)
          b = slice{axes=[1], starts=[3], ends=[6]}(s)
          @return(a, b)
    )", R"(
        module main
          x = @param -> float32[2, 6, 2, 3]
          i0 = @literal{int64[3] {0, 3, 1}}
          a = gather{axis=1}(x, i0)
          i1 = @literal{int64[3] {4, 2, 5}}
          b = gather{axis=1}(x, i1)
          @return(a, b)
    )", {}, 0, 0, simplify_exact);
}

TEST(simplify_algebra_text, whole_channel_shuffle_becomes_one_gather) {
    expect_simplified(R"(
        module main
          x = @param -> float32[1, 6, 4]
          r = reshape{dims=[1, 3, 2, 4]}(x)
          t = transpose{perm=[0, 2, 1, 3]}(r)
          s = reshape{dims=[1, 6, 4]}(t)
          y = relu(s)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[1, 6, 4]
          i = @literal{int64[6] {0, 2, 4, 1, 3, 5}}
          s = gather{axis=1}(x, i)
          y = relu(s)
          @return(y)
    )", {}, 0, 0, simplify_exact);
}

TEST(simplify_algebra_text, reshape_transposes_that_are_not_a_channel_shuffle_stay) {
    // Spatial axes swapped, the batch split instead of the channels, and a slice of a
    // gather along another axis than its own.
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[2, 6, 2, 3]
          r = reshape{dims=[2, 2, 3, 2, 3]}(x)
          t = transpose{perm=[0, 1, 2, 4, 3]}(r)
          s = reshape{dims=[2, 6, 2, 3]}(t)
          r2 = reshape{dims=[1, 2, 6, 2, 3]}(x)
          t2 = transpose{perm=[0, 2, 1, 3, 4]}(r2)
          s2 = reshape{dims=[2, 6, 2, 3]}(t2)
          i = @literal{int64[3] {5, 0, 2}}
          g = gather{axis=1}(x, i)
          h = slice{axes=[2], starts=[0], ends=[1]}(g)
          @return(s, s2, h)
    )", simplify_exact);
}

// Mask R-CNN's mask head pads tensors whose dims are run-time values: the pad rewrites read
// the rank, never the lens (they threw "lens() of dynamic shape" and failed the compile).
// The pass leaves dynamic results alone; its rules are called here on one directly.
TEST(simplify_algebra_text, pad_rules_take_a_dynamic_input) {
    auto m = parse_module(R"(
        module main
          x = @param -> float32[{0:?}, 3, {0:?}, {0:?}]
          p = pad{pads=[0, 0, 1, 1, 0, 0, 1, 1]}(x)
          w = @literal{float32[4, 3, 3, 3] {...}}
          y = convolution{padding=[0, 0, 0, 0]}(p, w)
          z = pad{pads=[0, 0, 0, 0, 0, 0, 0, 0]}(y)
          @return(z)
    )", {literals_by_name({{"w", random_literal(f32({4, 3, 3, 3}), 62)}})});
    // The last instruction of `op`'s kind (the pad after the convolution is the last pad).
    auto find = [&](const char* op) {
        auto found = m->end();
        for (auto it = m->begin(); it != m->end(); ++it)
            if (it->name() == op) found = it;
        return found;
    };
    auto conv = find("convolution");
    ASSERT_NE(conv, m->end());
    ASSERT_TRUE(algebra::fold_pad_into_window(*m, conv));
    auto zero_pad = find("pad");
    ASSERT_NE(zero_pad, m->end());
    EXPECT_TRUE(algebra::remove_zero_pad(*m, zero_pad));
    dead_code_elimination{}.apply(*m);
    const auto text = m->to_string();
    EXPECT_EQ(text.find("pad{"), std::string::npos) << text;
    EXPECT_NE(text.find("convolution{padding=[1, 1, 1, 1]"), std::string::npos) << text;
}

// A static gather of a dynamic tensor (Mask R-CNN's boxes [?, 4] picked by constant
// indices), then sliced: the pass visits the slice (its result is static) and must not read
// the gathered tensor's lens (it threw and failed the compile). Nothing to rewrite there.
TEST(simplify_algebra_text, a_slice_of_a_gather_of_a_dynamic_tensor_is_left_alone) {
    const char* text = R"(
        module main
          x = @param -> int64[{0:?}, 4]
          i = @literal{int64[2] {0, 1}}
          g = gather{axis=0}(x, i)
          s = slice{axes=[0], starts=[0], ends=[1]}(g)
          @return(s)
    )";
    auto m = parse_module(text);
    const auto before = m->to_string();
    EXPECT_NO_THROW(simplify_exact(*m));
    EXPECT_EQ(m->to_string(), before);
}

TEST(simplify_algebra_text, a_unary_op_only_gathered_from_runs_after_the_gather) {
    // Mask R-CNN: sigmoid over every class's mask, then one mask per detection picked
    // through a Flatten; a shape_of of the sigmoid reads x's shape instead.
    expect_simplified(R"(
        module main
          x = @param -> float32[3, 4, 2, 2]
          s = sigmoid(x)
          n = shape_of(s)
          f = flatten{axis=2}(s)
          i = @literal{int64[3] {1, 6, 11}}
          g = gather{axis=0}(f, i)
          @return(g, n)
    )", R"(
        module main
          x = @param -> float32[3, 4, 2, 2]
          n = shape_of(x)
          i = @literal{int64[3] {1, 6, 11}}
          f = flatten{axis=2}(x)
          g = gather{axis=0}(f, i)
          s = sigmoid(g)
          @return(s, n)
    )", {}, 0, 0, simplify_exact);
}

TEST(simplify_algebra_text, a_unary_op_read_elsewhere_stays_before_the_gather) {
    // The sigmoid's values are returned, a view of them is added to, the op is binary.
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[3, 4, 2]
          y = @param -> float32[3, 4, 2]
          i = @literal{int64[2] {2, 0}}
          s = sigmoid(x)
          g = gather{axis=0}(s, i)
          e = exp(x)
          f = flatten{axis=1}(e)
          a = add(f, f)
          h = gather{axis=0}(f, i)
          b = add(x, y)
          k = gather{axis=0}(b, i)
          @return(g, s, a, h, k)
    )", simplify_exact);
}

TEST(simplify_algebra_text, a_unary_op_moves_after_a_gather_over_a_run_time_count) {
    // Only rewired: the ops work their shapes out as they run.
    auto p = pass_text::parse(R"(
        module main
          x = @param -> float32[{0:64}, 4, 3]
          s = relu(x)
          f = flatten{axis=2}(s)
          i = @literal{int64[2] {0, 1}}
          g = gather{axis=0}(f, i)
          @return(g)
    )");
    simplify_exact(*p.get_main_module());
    EXPECT_TRUE(pass_text::module_matches(*p.get_main_module(), R"(
        module main
          x = @param -> float32[{0:64}, 4, 3]
          i = @literal{int64[2] {0, 1}}
          f = flatten{axis=2}(x)
          g = gather{axis=0}(f, i)
          s = relu(g)
          @return(s)
    )"));
}
