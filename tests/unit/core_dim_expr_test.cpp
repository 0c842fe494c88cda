// Symbolic dims: dim_expr's text form, and shape inference over named dims (two inputs
// that share a name share the dim; Concat along a cache axis gives "past + sequence").
#include "ops/tensor_generate.hpp"

#include <kiln/dim_expr.hpp>
#include <kiln/errors.hpp>
#include <kiln/module.hpp>
#include <kiln/reflect.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

using namespace kiln;

namespace {

dynamic_dimension named(const std::string& name, std::size_t min, std::size_t max) {
    dynamic_dimension d{min, max, {}};
    d.symbol = name;
    return d;
}

dynamic_dimension fixed(std::size_t n) { return {n, n, {}}; }

}  // namespace

TEST(core_dim_expr, parses_and_prints_canonically) {
    auto e = dim_expr::parse("sequence + past");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->to_string(), "past + sequence");
    EXPECT_EQ(dim_expr::parse("2*n + 1")->to_string(), "2*n + 1");
    EXPECT_EQ(dim_expr::parse("n*2 - 1 + m - m")->to_string(), "2*n - 1");
    EXPECT_EQ(dim_expr::parse("-a + 3")->to_string(), "-a + 3");
    EXPECT_EQ(dim_expr::parse("7")->to_string(), "7");
    EXPECT_TRUE(dim_expr::parse("batch")->is_symbol());
    EXPECT_FALSE(dim_expr::parse("n + 1")->is_symbol());
    for (auto bad : {"", "a +", "a b", "a/2", "floor(h)", "a + + b", "3a"}) EXPECT_FALSE(dim_expr::parse(bad)) << bad;
    // What exporters write that is not affine still becomes one name.
    EXPECT_EQ(dim_expr::from_dim_param("floor(h/2)").to_string(), "floor_h_2_");
    EXPECT_EQ(dim_expr::from_dim_param("3d").to_string(), "_3d");
    EXPECT_EQ(dim_expr::from_dim_param("past_sequence + sequence").to_string(), "past_sequence + sequence");
}

TEST(core_dim_expr, evaluates_and_combines) {
    auto e = *dim_expr::parse("2*a + b - 3");
    EXPECT_EQ(e.evaluate({{"a", 5}, {"b", 1}}), 8);
    EXPECT_FALSE(e.evaluate({{"a", 5}}));
    EXPECT_EQ((e - *dim_expr::parse("b")).to_string(), "2*a - 3");
    EXPECT_EQ((e * 0).to_string(), "0");
    EXPECT_EQ(dim_expr::symbol("x") + dim_expr::constant(2), *dim_expr::parse("x + 2"));
}

TEST(core_dim_expr, shapes_print_and_parse_symbols) {
    auto s = shape::make_dynamic(type::float32, {named("batch", 1, 8), fixed(4), named("past + sequence", 0, 300)});
    EXPECT_EQ(s.to_string(), "float32[{batch=1:8}, 4, {past + sequence=0:300}]");
    auto back = shape_from_value(shape_to_value(s));
    EXPECT_EQ(back, s);
    EXPECT_EQ(back.dyn_dims()[2].symbol, "past + sequence");
    // A fixed dim has no name to keep.
    auto f = shape::make_dynamic(type::float32, {named("batch", 2, 2), named("t", 1, 5)});
    EXPECT_EQ(f.dyn_dims()[0].symbol, "");
    EXPECT_NE(shape::make_dynamic(type::float32, {named("a", 1, 8)}), shape::make_dynamic(type::float32, {named("b", 1, 8)}));
}

TEST(core_dim_expr, concat_of_a_kv_cache_is_past_plus_sequence) {
    // past_key [batch, 4, past, 16] ++ key [batch, 4, sequence, 16] along the cache axis.
    auto past = shape::make_dynamic(type::float32, {named("batch", 1, 8), fixed(4), named("past", 0, 256), fixed(16)});
    auto key = shape::make_dynamic(type::float32, {named("batch", 1, 8), fixed(4), named("sequence", 1, 64), fixed(16)});
    auto cat = make_op("concat", {{"axis", 2}});
    auto s = cat.compute_shape({past, key});
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_EQ(s.to_string(), "float32[{batch=1:8}, 4, {past + sequence=1:320}, 16]");

    // Scores of the new queries against every key: [batch, 4, sequence, past + sequence].
    auto q = shape::make_dynamic(type::float32, {named("batch", 1, 8), fixed(4), named("sequence", 1, 64), fixed(16)});
    auto kt = make_op("transpose", {{"perm", {0, 1, 3, 2}}}).compute_shape({s});
    auto scores = make_op("matmul").compute_shape({q, kt});
    EXPECT_EQ(scores.dyn_dims()[3].symbol, "past + sequence") << scores;
    EXPECT_EQ(scores.dyn_dims()[2].symbol, "sequence") << scores;

    // A mask declared with the same expression adds; one of another name is refused
    // only if the sizes can never agree, so that one parses too.
    auto mask = shape::make_dynamic(type::float32, {named("batch", 1, 8), fixed(1), fixed(1), named("past + sequence", 1, 320)});
    auto sum = make_op("add").compute_shape({scores, mask});
    EXPECT_EQ(sum, scores);
}

TEST(core_dim_expr, names_that_differ_are_sampled_apart) {
    // Inputs that share "batch" agree at every sample; a different name does not, so an
    // op that needs equal sizes moves the two together (ONNX Runtime too takes a model that
    // names one size twice), and the result's dim follows neither name ...
    auto a = shape::make_dynamic(type::float32, {named("n", 1, 8), fixed(3)});
    auto b = shape::make_dynamic(type::float32, {named("m", 2, 8), fixed(3)});
    auto ab = make_op("concat", {{"axis", 1}}).compute_shape({a, b});
    ASSERT_TRUE(ab.dynamic()) << ab;
    EXPECT_FALSE(ab.dyn_dims()[0].is_fixed()) << ab;
    EXPECT_TRUE(ab.dyn_dims()[0].symbol.empty()) << ab;
    EXPECT_EQ(ab.dyn_dims()[1], fixed(6)) << ab;
    // ... and one name is kept where both inputs share it.
    auto s = make_op("concat", {{"axis", 1}}).compute_shape({a, a});
    EXPECT_EQ(s.to_string(), "float32[{n=1:8}, 6]");
    // Before names, a dim of unknown name was sampled with every other: the unnamed dims
    // of one tensor used twice still agree.
    auto u = shape::make_dynamic(type::float32, {{1, 16, {}}, fixed(4)});
    auto uu = make_op("add").compute_shape({u, u});
    EXPECT_EQ(uu.dyn_dims()[0], (dynamic_dimension{1, 16, {}}));
}

TEST(core_dim_expr, affine_results_get_an_expression) {
    auto x = shape::make_dynamic(type::float32, {named("t", 1, 100), fixed(8)});
    // Padding a sequence by 2 + 3 frames.
    auto padded = make_op("pad", {{"pads", {2, 0, 3, 0}}}).compute_shape({x});
    EXPECT_EQ(padded.dyn_dims()[0].symbol, "t + 5") << padded;
    EXPECT_EQ(padded.dyn_dims()[0].min, 6u);
    EXPECT_EQ(padded.dyn_dims()[0].max, 105u);
    // A strided window is not affine: bounds only, no name.
    auto pooled = make_op("pooling", {{"lengths", {2}}, {"stride", {2}}})
                      .compute_shape({shape::make_dynamic(type::float32, {fixed(1), fixed(1), named("t", 2, 100)})});
    EXPECT_EQ(pooled.dyn_dims()[2].symbol, "") << pooled;
    EXPECT_EQ(pooled.dyn_dims()[2].min, 1u);
    EXPECT_EQ(pooled.dyn_dims()[2].max, 50u);
}

TEST(core_dim_expr, shape_values_print_parse_and_stay_out_of_equality) {
    auto s = shape(type::int64, {3}).with_values({"batch", "sequence + 1", "64"});
    EXPECT_EQ(s.to_string(), "int64[3]<batch, sequence + 1, 64>");
    auto back = shape_from_value(shape_to_value(s));
    EXPECT_EQ(back.values(), s.values());
    EXPECT_EQ(s, shape(type::int64, {3}));  // an annotation, not part of equality
    // Numbers alone are the literal's own text: not printed.
    EXPECT_EQ(shape(type::int64, {2}).with_values({"4", "16"}).to_string(), "int64[2]");
    EXPECT_EQ(shape(type::int64, {2}).with_values({"", "16"}).to_string(), "int64[2]<?, 16>");
    EXPECT_THROW(shape(type::float32, {2}).with_values({"1", "2"}), error);
    EXPECT_THROW(shape(type::int64, {2}).with_values({"1"}), error);
}

TEST(core_dim_expr, shape_arithmetic_over_named_dims_folds) {
    // Shape(x) -> Gather(0) -> Unsqueeze -> Concat with [4, 16] -> Reshape: the exporters'
    // way of splitting heads, whose result's dims are known from the names.
    module m;
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {named("batch", 1, 8), named("sequence", 1, 128),
                                                                      fixed(64)}));
    auto dims = m.add_instruction(make_op("shape_of"), {x});
    auto b = m.add_instruction(make_op("gather", {{"axis", 0}}), {dims, m.add_literal(literal(std::int64_t{0}))});
    auto s = m.add_instruction(make_op("gather", {{"axis", 0}}), {dims, m.add_literal(literal(std::int64_t{1}))});
    EXPECT_EQ(b->get_shape().values(), std::vector<std::string>{"batch"});
    auto ub = m.add_instruction(make_op("unsqueeze", {{"axes", {0}}}), {b});
    auto us = m.add_instruction(make_op("unsqueeze", {{"axes", {0}}}), {s});
    auto heads = m.add_literal(literal(shape(type::int64, {2}), std::vector<std::int64_t>{4, 16}));
    auto target = m.add_instruction(make_op("concat", {{"axis", 0}}), {ub, us, heads});
    EXPECT_EQ(target->get_shape().to_string(), "int64[4]<batch, sequence, 4, 16>");
    auto r = m.add_instruction(make_op("reshape_dynamic"), {x, target});
    EXPECT_EQ(r->get_shape().to_string(), "float32[{batch=1:8}, {sequence=1:128}, 4, 16]");
    // Positions past .. past + sequence: Range's length is the sequence.
    auto total = m.add_instruction(make_op("add"), {s, s});
    EXPECT_EQ(total->get_shape().values(), std::vector<std::string>{"2*sequence"});
    auto range = m.add_instruction(make_op("range"), {s, total, m.add_literal(literal(std::int64_t{1}))});
    EXPECT_EQ(range->get_shape().dyn_dims().at(0).symbol, "sequence") << range->get_shape();
    // Once the input is static, everything is static.
    m.set_parameter_shapes({{"x", shape(type::float32, {2, 5, 64})}});
    EXPECT_EQ(r->get_shape(), shape(type::float32, {2, 5, 4, 16}));
    EXPECT_EQ(range->get_shape(), shape(type::int64, {5}));
}

TEST(core_dim_expr, huge_known_sizes_are_not_materialized) {
    // A hostile model's Range over 2^40 values: shape inference must not compute it (the
    // result stays dynamic, for run time to refuse or allocate).
    module m;
    auto r = m.add_instruction(make_op("range"), {m.add_literal(literal(std::int64_t{0})),
                                                  m.add_literal(literal(std::int64_t{1} << 40)),
                                                  m.add_literal(literal(std::int64_t{1}))});
    EXPECT_TRUE(r->get_shape().dynamic()) << r->get_shape();
    // A small one is: its length is known at compile time.
    auto small = m.add_instruction(make_op("range"), {m.add_literal(literal(std::int64_t{2})),
                                                      m.add_literal(literal(std::int64_t{9})),
                                                      m.add_literal(literal(std::int64_t{3}))});
    EXPECT_EQ(small->get_shape(), shape(type::int64, {3}));
    EXPECT_EQ(small->get_shape().values(), (std::vector<std::string>{"2", "5", "8"}));
}

// A named dim that must equal unnamed ones (a class token expanded to a size the sampling
// does not know, concatenated with the patches) cannot move on its own; the dims that change
// when it moves together with them are unknown, never the size seen at the base point
// (vit_tiny once got a static batch of 1 here and failed at batch 2).
TEST(core_dim_expr, a_name_that_cannot_move_alone_leaves_its_dims_unknown) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto token = m.add_parameter("token", shape::make_dynamic(type::float32, {any, any, fixed(192)}));
    auto patches = m.add_parameter("patches", shape::make_dynamic(type::float32, {named("batch", 1, 64), fixed(196), fixed(192)}));
    auto cat = m.add_instruction(make_op("concat", {{"axis", 1}}), {token, patches});
    const auto& s = cat->get_shape();
    ASSERT_TRUE(s.dynamic()) << s.to_string();
    EXPECT_FALSE(s.dyn_dims()[0].is_fixed()) << s.to_string();
    EXPECT_FALSE(s.dyn_dims()[1].is_fixed()) << s.to_string();
    EXPECT_EQ(s.dyn_dims()[2], fixed(192)) << s.to_string();
}

// A Resize to Concat(Slice(Shape(low), 0, 2), Shape(high)[2:]) where low's and high's spatial
// dims have no names (they come out of strided convolutions): torchvision's LRASPP head with
// dynamic height and width. The batch and channels known in Shape(low) must survive the
// unknown values beside them, so the Resize's result keeps 128 channels for the convolution
// after it (once: x float32[1, 1, 1, 1] and "cannot infer a shape").
TEST(core_dim_expr, known_values_beside_unknown_ones_survive_shape_arithmetic) {
    module m("main");
    dynamic_dimension any{0, 2048, {}};
    auto low = m.add_parameter("low", shape::make_dynamic(type::float32, {named("batch", 1, 8), fixed(128), any, any}));
    auto high = m.add_parameter("high", shape::make_dynamic(type::float32, {named("batch", 1, 8), fixed(40),
                                                                            dynamic_dimension{0, 4096, {}},
                                                                            dynamic_dimension{0, 4096, {}}}));
    auto sl = m.add_instruction(make_op("shape_of"), {low});
    EXPECT_EQ(sl->get_shape().to_string(), "int64[4]<batch, 128, ?, ?>");
    auto nc = m.add_instruction(make_op("slice", {{"axes", {0}}, {"starts", {0}}, {"ends", {2}}}), {sl});
    EXPECT_EQ(nc->get_shape().to_string(), "int64[2]<batch, 128>");
    auto sh = m.add_instruction(make_op("shape_of"), {high});
    auto h = m.add_instruction(make_op("gather", {{"axis", 0}}), {sh, m.add_literal(literal(std::int64_t{2}))});
    auto w = m.add_instruction(make_op("gather", {{"axis", 0}}), {sh, m.add_literal(literal(std::int64_t{3}))});
    // Unknown, but still followed as values (data tensors carry none).
    EXPECT_EQ(h->get_shape().to_string(), "int64[]<?>");
    auto uh = m.add_instruction(make_op("unsqueeze", {{"axes", {0}}}), {h});
    auto uw = m.add_instruction(make_op("unsqueeze", {{"axes", {0}}}), {w});
    auto hw = m.add_instruction(make_op("concat", {{"axis", 0}}), {uh, uw});
    auto sizes = m.add_instruction(make_op("concat", {{"axis", 0}}), {nc, hw});
    EXPECT_EQ(sizes->get_shape().to_string(), "int64[4]<batch, 128, ?, ?>");
    auto up = m.add_instruction(make_op("resize_dynamic", {{"use_sizes", true}}), {low, sizes});
    const auto& s = up->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_EQ(s.dyn_dims()[0].symbol, "batch") << s;
    EXPECT_EQ(s.dyn_dims()[1], fixed(128)) << s;
    // A size from an unknown value has no bounds (it may be anything the run computes).
    EXPECT_FALSE(s.dyn_dims()[2].is_fixed()) << s;
    EXPECT_EQ(s.dyn_dims()[2].max, dynamic_dimension::unbounded) << s;
    // Once the inputs are static, everything is.
    m.set_parameter_shapes({{"low", shape(type::float32, {2, 128, 8, 10})}, {"high", shape(type::float32, {2, 40, 32, 40})}});
    EXPECT_EQ(sizes->get_shape().values(), (std::vector<std::string>{"2", "128", "32", "40"}));
    EXPECT_EQ(up->get_shape(), shape(type::float32, {2, 128, 32, 40}));
}

// An unknown value that moves by one can leave a result unchanged that still depends on it:
// Swin's window count is a size divided by 7. Such a result must stay unknown (Swin-T with
// dynamic height and width once got a static window count of 0 and failed to load).
TEST(core_dim_expr, a_value_divided_from_an_unknown_one_is_not_taken_as_constant) {
    module m("main");
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {fixed(1), dynamic_dimension{0, 4096, {}}}));
    auto sx = m.add_instruction(make_op("shape_of"), {x});
    auto n = m.add_instruction(make_op("gather", {{"axis", 0}}), {sx, m.add_literal(literal(std::int64_t{1}))});
    auto q = m.add_instruction(make_op("div"), {n, m.add_literal(literal(std::int64_t{7}))});
    EXPECT_EQ(q->get_shape().to_string(), "int64[]<?>");
    auto r = m.add_instruction(make_op("range"), {m.add_literal(literal(std::int64_t{0})), q,
                                                  m.add_literal(literal(std::int64_t{1}))});
    ASSERT_TRUE(r->get_shape().dynamic()) << r->get_shape();
    EXPECT_EQ(r->get_shape().dyn_dims()[0].max, dynamic_dimension::unbounded) << r->get_shape();
    m.set_parameter_shapes({{"x", shape(type::float32, {1, 30})}});
    EXPECT_EQ(q->get_shape().values(), std::vector<std::string>{"4"});
    EXPECT_EQ(r->get_shape(), shape(type::int64, {4}));
}

// Unnamed dims share one name, so [?, ?, ?, ?] plus a [1, 3, 49, 49] bias cannot move them
// together; the sum's first dim is still the unnamed operand's own, not the base sample's 1
// (Swin-T with dynamic height and width ran with a static [1, 3, 49, 49] there and failed).
TEST(core_dim_expr, a_broadcast_one_beside_unmoved_unnamed_dims_stays_unknown) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto scores = m.add_parameter("scores", shape::make_dynamic(type::float32, {any, any, any, any}));
    auto bias = m.add_literal(literal(shape(type::float32, {1, 3, 49, 49}), std::vector<float>(3 * 49 * 49, 0.5f)));
    auto sum = m.add_instruction(make_op("add"), {scores, bias});
    const auto& s = sum->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_FALSE(s.dyn_dims()[0].is_fixed()) << s;
    EXPECT_EQ(s.dyn_dims()[1], fixed(3)) << s;
    EXPECT_EQ(s.dyn_dims()[3], fixed(49)) << s;
    m.set_parameter_shapes({{"scores", shape(type::float32, {42, 3, 49, 49})}});
    EXPECT_EQ(sum->get_shape(), shape(type::float32, {42, 3, 49, 49}));
}

// An empty slice of a shape (torch's x.shape[:0], Swin's window-mask arithmetic) has all its
// values, there being none: a Concat with it keeps the other input's values, and the Reshape
// to that is shaped (once it stayed [?, ?] even with static inputs, and the ScatterND after it
// could not be shaped).
TEST(core_dim_expr, an_empty_shape_slice_keeps_concat_values) {
    module m("main");
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {named("n", 1, 64), fixed(6)}));
    auto sx = m.add_instruction(make_op("shape_of"), {x});
    auto none = m.add_instruction(make_op("slice", {{"axes", {0}}, {"starts", {2}}, {"ends", {2}}}), {sx});
    EXPECT_EQ(none->get_shape(), shape(type::int64, {0}));
    auto dims = m.add_instruction(make_op("concat", {{"axis", 0}}), {sx, none});
    EXPECT_EQ(dims->get_shape().to_string(), "int64[2]<n, 6>");
    auto r = m.add_instruction(make_op("reshape_dynamic"), {x, dims});
    EXPECT_EQ(r->get_shape().to_string(), "float32[{n=1:64}, 6]");
    m.set_parameter_shapes({{"x", shape(type::float32, {3, 6})}});
    EXPECT_EQ(dims->get_shape().values(), (std::vector<std::string>{"3", "6"}));
    EXPECT_EQ(r->get_shape(), shape(type::float32, {3, 6}));
}

// Unnamed dims with the same bounds share a name, so [?, ?, ?] @ [96, 288] finds no base point
// (its inner dim must be 96 while the others move with it); apart, and starting where an input
// has a size, they do (Swin-T's generic program with dynamic height and width once had none).
TEST(core_dim_expr, unnamed_dims_that_must_meet_a_sized_one_are_shaped_apart) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {any, any, any}));
    auto w = m.add_literal(literal(shape(type::float32, {96, 288}), std::vector<float>(96 * 288, 0.25f)));
    auto y = m.add_instruction(make_op("matmul"), {x, w});
    const auto& s = y->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_FALSE(s.dyn_dims()[0].is_fixed()) << s;
    EXPECT_FALSE(s.dyn_dims()[1].is_fixed()) << s;
    EXPECT_EQ(s.dyn_dims()[2], fixed(288)) << s;
    m.set_parameter_shapes({{"x", shape(type::float32, {2, 35, 96})}});
    EXPECT_EQ(y->get_shape(), shape(type::float32, {2, 35, 288}));
}

TEST(core_dim_expr, products_of_names_parse_print_and_evaluate) {
    auto e = dim_expr::parse("seq*batch + 2*batch*seq*1 - 1");
    ASSERT_TRUE(e);
    EXPECT_EQ(e->to_string(), "3*batch*seq - 1");
    EXPECT_EQ(e->evaluate({{"batch", 4}, {"seq", 7}}), 83);
    EXPECT_FALSE(e->evaluate({{"batch", 4}}));
    EXPECT_EQ(e->names(), (std::set<std::string>{"batch", "seq"}));
    EXPECT_FALSE(dim_expr::parse("a*b")->is_symbol());
    EXPECT_EQ(dim_expr::product({"s", "b"}), *dim_expr::parse("b*s"));
    EXPECT_EQ(dim_expr::factors("b*s"), (std::vector<std::string>{"b", "s"}));
    EXPECT_FALSE(dim_expr::parse("a*2*b"));  // a coefficient comes first or last
    EXPECT_FALSE(dim_expr::parse("a*b")->evaluate({{"a", std::int64_t{1} << 40}, {"b", std::int64_t{1} << 40}}));
}

TEST(core_dim_expr, a_product_of_two_named_dims_gets_its_expression) {
    // PyTorch's attention: [seq, batch, E] -> Reshape to [seq * batch, E] with the sizes from
    // Shape, and back to [seq, batch, E] with them after the output projection.
    module m;
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {named("seq", 1, 64), named("batch", 1, 8),
                                                                      fixed(16)}));
    auto dims = m.add_instruction(make_op("shape_of"), {x});
    auto gather = [&](std::int64_t i) {
        return m.add_instruction(make_op("gather", {{"axis", 0}}),
                                 {dims, m.add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{i}))});
    };
    auto t = gather(0), b = gather(1), e = gather(2);
    auto tb = m.add_instruction(make_op("mul"), {t, b});
    EXPECT_EQ(tb->get_shape().values(), std::vector<std::string>{"batch*seq"});
    auto flat = m.add_instruction(make_op("reshape_dynamic"),
                                  {x, m.add_instruction(make_op("concat", {{"axis", 0}}), {tb, e})});
    const auto& d = flat->get_shape().dyn_dims().at(0);
    EXPECT_EQ(d.symbol, "batch*seq") << flat->get_shape();
    EXPECT_EQ(d.min, 1u);
    EXPECT_EQ(d.max, 512u);
    auto relu = m.add_instruction(make_op("relu"), {flat});
    EXPECT_EQ(relu->get_shape(), flat->get_shape());
    auto back = m.add_instruction(make_op("reshape_dynamic"),
                                  {relu, m.add_instruction(make_op("concat", {{"axis", 0}}), {t, b, e})});
    EXPECT_EQ(back->get_shape().dyn_dims().at(0).symbol, "seq") << back->get_shape();
    EXPECT_EQ(back->get_shape().dyn_dims().at(1).symbol, "batch");
    // A sum plus a product, fitted the same way: seq * batch + seq + 3.
    auto mixed = m.add_instruction(make_op("add"), {m.add_instruction(make_op("add"), {tb, t}),
                                                    m.add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{3}))});
    EXPECT_EQ(mixed->get_shape().values(), std::vector<std::string>{"batch*seq + seq + 3"});
    m.set_parameter_shapes({{"x", shape(type::float32, {5, 3, 16})}});
    EXPECT_EQ(flat->get_shape(), shape(type::float32, {15, 16}));
    EXPECT_EQ(back->get_shape(), shape(type::float32, {5, 3, 16}));
}

// RetinaNet splits its concatenated anchors per feature level: Slice(all, start, start + n)
// with start and n computed from the levels' sizes, each an unknown value. Every sample
// point that keeps start and n apart must not make the slice's length a constant 0.
TEST(core_dim_expr, a_slice_between_two_unknown_values_stays_unknown) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto all = m.add_parameter("all", shape::make_dynamic(type::float32, {any, fixed(4)}));
    auto lv0 = m.add_parameter("lv0", shape::make_dynamic(type::float32, {fixed(1), dynamic_dimension{0, 4096, {}}}));
    auto lv1 = m.add_parameter("lv1", shape::make_dynamic(type::float32, {fixed(1), dynamic_dimension{0, 2048, {}}}));
    auto one = m.add_literal(literal(std::int64_t{1}));
    auto n0 = m.add_instruction(make_op("gather", {{"axis", 0}}), {m.add_instruction(make_op("shape_of"), {lv0}), one});
    auto n1 = m.add_instruction(make_op("gather", {{"axis", 0}}), {m.add_instruction(make_op("shape_of"), {lv1}), one});
    auto zero = m.add_literal(literal(shape(type::int64, {1}), std::vector<std::int64_t>{0}));
    auto start = m.add_instruction(make_op("add"), {zero, m.add_instruction(make_op("unsqueeze", {{"axes", {0}}}), {n0})});
    auto end = m.add_instruction(make_op("add"), {start, m.add_instruction(make_op("unsqueeze", {{"axes", {0}}}), {n1})});
    auto part = m.add_instruction(make_op("slice_dynamic"), {all, start, end, zero});
    const auto& s = part->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_FALSE(s.dyn_dims()[0].is_fixed()) << s;
    EXPECT_EQ(s.dyn_dims()[1], fixed(4)) << s;
    m.set_parameter_shapes({{"all", shape(type::float32, {30, 4})},
                            {"lv0", shape(type::float32, {1, 20})},
                            {"lv1", shape(type::float32, {1, 6})}});
    EXPECT_EQ(part->get_shape(), shape(type::float32, {6, 4}));
}

// Mask R-CNN's anchors: Concat([x, y, x, y], axis 1) where one input is already static (its
// size known from the image) and the others are unnamed dims that must equal it. The unnamed
// dims share one name, which must start at the static size for the op to accept any point.
TEST(core_dim_expr, unnamed_dims_sharing_a_name_start_at_a_size_another_input_has) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto xs = m.add_parameter("xs", shape(type::int32, {40000, 1}));
    auto ys = m.add_parameter("ys", shape::make_dynamic(type::int32, {any, fixed(1)}));
    auto zs = m.add_parameter("zs", shape::make_dynamic(type::int32, {any, fixed(1)}));
    auto c = m.add_instruction(make_op("concat", {{"axis", 1}}), {xs, ys, xs, zs});
    EXPECT_EQ(c->get_shape(), shape(type::int32, {40000, 4}));
}

// Mask R-CNN pastes each mask into an image-sized canvas inside a Loop: Concat(masks so far
// [n, h, w], this one [1, ?, ?]) along axis 0. Neither named dim can move without the other
// and the unnamed ones: moved all together, the result's dims follow no one name, so they
// are unknown (the body used to fail to build, deferred as an error).
TEST(core_dim_expr, named_dims_that_must_meet_unnamed_ones_move_together) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto done = m.add_parameter("done", shape::make_dynamic(type::float32, {fixed(0), named("h", 0, 4096),
                                                                             named("w", 0, 4096)}));
    auto one = m.add_parameter("one", shape::make_dynamic(type::float32, {fixed(1), any, any}));
    auto c = m.add_instruction(make_op("concat", {{"axis", 0}}), {done, one});
    const auto& s = c->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_EQ(s.dyn_dims()[0], fixed(1)) << s;
    EXPECT_FALSE(s.dyn_dims()[1].is_fixed()) << s;
    EXPECT_FALSE(s.dyn_dims()[2].is_fixed()) << s;
    m.set_parameter_shapes({{"done", shape(type::float32, {0, 30, 40})}, {"one", shape(type::float32, {1, 30, 40})}});
    EXPECT_EQ(c->get_shape(), shape(type::float32, {1, 30, 40}));
}

// Mask R-CNN's mask head convolves a [?, ?, ?, ?] tensor (ScatterElements into a
// ConstantOfShape of run-time sizes): only its channels must be the weights' 256. Its other
// dims stay unknown; they were once all taken as 256 (a 144 GB arena).
TEST(core_dim_expr, a_convolution_of_unknown_dims_pins_only_its_channels) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {any, any, any, any}));
    auto w = m.add_literal(literal(shape(type::float32, {8, 16, 3, 3}), std::vector<float>(8 * 16 * 9, 0.5f)));
    auto y = m.add_instruction(make_op("convolution", {{"padding", {1, 1, 1, 1}}}), {x, w});
    const auto& s = y->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_FALSE(s.dyn_dims()[0].is_fixed()) << s;
    EXPECT_EQ(s.dyn_dims()[1], fixed(8)) << s;
    EXPECT_FALSE(s.dyn_dims()[2].is_fixed()) << s;
    EXPECT_FALSE(s.dyn_dims()[3].is_fixed()) << s;
}

// The Shape of a tensor whose one dim is unnamed (Mask R-CNN's RoI count) is an unknown value
// that is still followed: a Concat of it with known sizes keeps them (it once lost all four,
// and the mask head's convolutions were left with no static dims at all).
TEST(core_dim_expr, the_shape_of_an_unnamed_dim_is_followed_as_an_unknown_value) {
    module m("main");
    auto rois = m.add_parameter("rois", shape::make_dynamic(type::int64, {dynamic_dimension{0, 1000, {}}}));
    auto n = m.add_instruction(make_op("shape_of"), {rois});
    EXPECT_EQ(n->get_shape().to_string(), "int64[1]<?>");
    auto rest = m.add_literal(literal(shape(type::int64, {3}), std::vector<std::int64_t>{256, 14, 14}));
    auto dims = m.add_instruction(make_op("concat", {{"axis", 0}}), {n, rest});
    EXPECT_EQ(dims->get_shape().to_string(), "int64[4]<?, 256, 14, 14>");
}

// ConstantOfShape of <?, 256, 14, 14> (Mask R-CNN's zeros, one row per RoI): its shape comes
// from the values without making the tensor, so the far sample points (257 RoIs and more,
// tens of millions of elements) are shaped too, and the known sizes stay static.
TEST(core_dim_expr, constant_of_shape_of_partly_known_sizes_keeps_them) {
    module m("main");
    auto rois = m.add_parameter("rois", shape::make_dynamic(type::int64, {dynamic_dimension{0, 1000, {}}}));
    auto n = m.add_instruction(make_op("shape_of"), {rois});
    auto rest = m.add_literal(literal(shape(type::int64, {3}), std::vector<std::int64_t>{256, 14, 14}));
    auto dims = m.add_instruction(make_op("concat", {{"axis", 0}}), {n, rest});
    op::constant_of_shape fill;
    fill.value = literal(shape(type::float32, {1}), std::vector<float>{0});
    auto zeros = m.add_instruction(fill, {dims});
    const auto& s = zeros->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_FALSE(s.dyn_dims()[0].is_fixed()) << s;
    EXPECT_EQ(s.dyn_dims()[1], fixed(256)) << s;
    EXPECT_EQ(s.dyn_dims()[2], fixed(14)) << s;
    EXPECT_EQ(s.dyn_dims()[3], fixed(14)) << s;
    m.set_parameter_shapes({{"rois", shape(type::int64, {7})}});
    EXPECT_EQ(zeros->get_shape(), shape(type::float32, {7, 256, 14, 14}));
}

// Keypoint R-CNN's heatmap per box: Reshape(roi_map [?, ?, ?], [17, -1]) then ArgMax along
// the second axis. The empty map fits any Reshape and makes its -1 a 0; that sample must not
// decide the size (it once made the ArgMax refuse an empty axis and the whole Loop body fail).
TEST(core_dim_expr, an_empty_sample_does_not_decide_a_reshapes_inferred_dim) {
    module m("main");
    dynamic_dimension any{0, dynamic_dimension::unbounded, {}};
    auto map = m.add_parameter("map", shape::make_dynamic(type::float32, {any, any, any}));
    auto dims = m.add_literal(literal(shape(type::int64, {2}), std::vector<std::int64_t>{17, -1}));
    auto r = m.add_instruction(make_op("reshape_dynamic"), {map, dims});
    const auto& s = r->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_EQ(s.dyn_dims()[0], fixed(17)) << s;
    EXPECT_FALSE(s.dyn_dims()[1].is_fixed()) << s;
    m.set_parameter_shapes({{"map", shape(type::float32, {17, 4, 6})}});
    EXPECT_EQ(r->get_shape(), shape(type::float32, {17, 24}));
}

// GridSample with every dim of the input and the grid unnamed (`kiln_conformance --dynamic`):
// the grid's last dim must be 2, so no dim can move when all share one name, and the result
// was once a static [2, 2, 2, 2] that no other call fitted. Apart, the batches move together.
TEST(core_dim_expr, grid_sample_of_unnamed_dims_keeps_them_dynamic) {
    module m("main");
    dynamic_dimension any{1, 8, {}};
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {any, any, any, any}));
    auto grid = m.add_parameter("grid", shape::make_dynamic(type::float32, {any, any, any, any}));
    auto y = m.add_instruction(make_op("grid_sample"), {x, grid});
    const auto& s = y->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    for (std::size_t i = 0; i < 4; ++i) EXPECT_FALSE(s.dyn_dims()[i].is_fixed()) << s;
    m.set_parameter_shapes({{"x", shape(type::float32, {1, 1, 3, 5})}, {"grid", shape(type::float32, {1, 2, 4, 2})}});
    EXPECT_EQ(y->get_shape(), shape(type::float32, {1, 1, 2, 4}));
}

// The volumetric one's grid ends in a 3 that no shared base size reaches: apart, one dim at a
// small size of its own finds a base (it once failed to build at all).
TEST(core_dim_expr, a_volumetric_grid_sample_of_unnamed_dims_finds_a_base) {
    module m("main");
    dynamic_dimension any{1, 8, {}};
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {any, any, any, any, any}));
    auto grid = m.add_parameter("grid", shape::make_dynamic(type::float32, {any, any, any, any, any}));
    auto y = m.add_instruction(make_op("grid_sample"), {x, grid});
    const auto& s = y->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_FALSE(s.dyn_dims()[0].is_fixed()) << s;
    EXPECT_FALSE(s.dyn_dims()[1].is_fixed()) << s;
    m.set_parameter_shapes(
        {{"x", shape(type::float32, {2, 3, 4, 4, 4})}, {"grid", shape(type::float32, {2, 5, 6, 7, 3})}});
    EXPECT_EQ(y->get_shape(), shape(type::float32, {2, 3, 5, 6, 7}));
}

// Exporters that name every dim (x [N, C, H, W]) before a convolution: C must be the weights'
// 3 and H, W at least the kernel, so no shared base size fits; apart, every dim at an input's
// size does. C is then pinned (nothing follows it), the others stay symbolic.
TEST(core_dim_expr, a_convolution_of_named_dims_pins_its_channels) {
    module m("main");
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {named("N", 1, 64), named("C", 1, 64),
                                                                       named("H", 1, 512), named("W", 1, 512)}));
    auto w = m.add_literal(literal(shape(type::float32, {4, 3, 3, 3}), std::vector<float>(4 * 27, 0.5f)));
    auto y = m.add_instruction(make_op("convolution"), {x, w});
    const auto& s = y->get_shape();
    ASSERT_TRUE(s.dynamic()) << s;
    EXPECT_EQ(s.dyn_dims()[0].symbol, "N") << s;
    EXPECT_EQ(s.dyn_dims()[1], fixed(4)) << s;
    EXPECT_EQ(s.dyn_dims()[2].symbol, "H - 2") << s;
    m.set_parameter_shapes({{"x", shape(type::float32, {2, 3, 10, 12})}});
    EXPECT_EQ(y->get_shape(), shape(type::float32, {2, 4, 8, 10}));
}

// wav2vec2's feature extractor: a strided Conv1d over raw samples, (samples - 10) / 5 + 1,
// is 1 at its base (samples at the kernel's 10) and at every near step. It was taken as a
// static 1, so the next convolution (kernel 3) refused every input; far from the base it
// shows that it changes, and it stays dynamic with its bounds.
TEST(core_dim_expr, a_strided_convolution_of_a_named_dim_stays_dynamic) {
    module m("main");
    auto x = m.add_parameter("x", shape::make_dynamic(type::float32, {named("batch", 0, 4096), fixed(1),
                                                                       named("samples", 0, 480000)}));
    auto w0 = m.add_literal(literal(shape(type::float32, {8, 1, 10}), std::vector<float>(80, 0.5f)));
    auto w1 = m.add_literal(literal(shape(type::float32, {8, 8, 3}), std::vector<float>(192, 0.5f)));
    auto y0 = m.add_instruction(make_op("convolution", {{"padding", {0, 0}}, {"stride", {5}}, {"dilation", {1}}}),
                                {x, w0});
    const auto& s0 = y0->get_shape();
    ASSERT_TRUE(s0.dynamic()) << s0;
    EXPECT_EQ(s0.dyn_dims()[0].symbol, "batch") << s0;
    EXPECT_FALSE(s0.dyn_dims()[2].is_fixed()) << s0;
    EXPECT_EQ(s0.dyn_dims()[2].max, (480000 - 10) / 5 + 1) << s0;
    auto y1 = m.add_instruction(make_op("convolution", {{"padding", {0, 0}}, {"stride", {2}}, {"dilation", {1}}}),
                                {y0, w1});
    ASSERT_TRUE(y1->get_shape().dynamic()) << y1->get_shape();
    m.set_parameter_shapes({{"x", shape(type::float32, {2, 1, 16000})}});
    EXPECT_EQ(y1->get_shape(), shape(type::float32, {2, 8, 1599}));
}
