// fuse_pointwise as before/after text (pass_text_util.hpp). A group becomes one
// `fused{nodes=[...]}` in its root's place: the body lists the members in program order,
// each {op, args} with args >= 0 a body node and args < 0 input -a-1 of the fused
// instruction (numbered as the members first read them); scalar literals come first, as
// fused_literal nodes. Each rewrite is also run on random data (bitwise: the fused op's
// reference compute runs the same ops).
#include "pass_text_util.hpp"
#include "passes/fuse_pointwise.hpp"
#include "passes_test_util.hpp"

#include "ops/pointwise_unary.hpp"

using namespace kiln;

namespace {

void fuse(module& m) { fuse_pointwise{}.apply(m); }

void expect_fused(std::string_view before, std::string_view after, const pass_text::pass_fn& pass = fuse) {
    auto q = passes_test::check_same_results(pass_text::parse(before), pass, 0, 0);
    EXPECT_TRUE(pass_text::module_matches(*q.get_main_module(), after));
}

void expect_unchanged(std::string_view text, const pass_text::pass_fn& pass = fuse) {
    pass_text::expect_unchanged(text, pass);
}

}  // namespace

TEST(fuse_pointwise_text, a_chain_with_broadcast_and_a_scalar_is_one_instruction) {
    // y broadcasts to x's lens; h (a scalar literal) moves into the body and is left
    // unread (dead-code elimination drops it).
    expect_fused(R"(
        module main
          x = @param -> float32[2, 3]
          y = @param -> float32[3]
          h = @literal{float32[] {0.5}}
          a = mul(x, y)
          b = add(a, h)
          c = exp(b)
          @return(c)
    )", R"(
        module main
          x = @param -> float32[2, 3]
          y = @param -> float32[3]
          h = @literal{float32[] {0.5}}
          c = fused{nodes=[{op: {name: "fused_literal", attributes: {value: {shape: "float32[]", data: 0x0000003f}}}, args: []}, {op: {name: "mul", attributes: {}}, args: [-1, -2]}, {op: {name: "add", attributes: {}}, args: [1, 0]}, {op: {name: "exp", attributes: {}}, args: [2]}]}(x, y)
          @return(c)
    )");
}

TEST(fuse_pointwise_text, softmax_is_one_row_group) {
    // Both reductions reduce axis 1 of the group's domain [2, 4] and keep their dims.
    expect_fused(R"(
        module main
          x = @param -> float32[2, 4]
          m = reduce_max{axes=[1]}(x)
          s = sub(x, m)
          e = exp(s)
          z = reduce_sum{axes=[1]}(e)
          y = div(e, z)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[2, 4]
          y = fused{nodes=[{op: {name: "reduce_max", attributes: {axes: [1]}}, args: [-1]}, {op: {name: "sub", attributes: {}}, args: [-1, 0]}, {op: {name: "exp", attributes: {}}, args: [1]}, {op: {name: "reduce_sum", attributes: {axes: [1]}}, args: [2]}, {op: {name: "div", attributes: {}}, args: [2, 3]}]}(x)
          @return(y)
    )");
}

TEST(fuse_pointwise_text, a_reduction_over_other_axes_stays_outside) {
    // r1 reduces axis 1 and joins y's group; r0 reduces axis 0: another group, of one op,
    // which stays as it was, and becomes an input.
    expect_fused(R"(
        module main
          x = @param -> float32[2, 4]
          r0 = reduce_mean{axes=[0]}(x)
          r1 = reduce_mean{axes=[1]}(x)
          y = add(r0, r1)
          @return(y)
    )", R"(
        module main
          x = @param -> float32[2, 4]
          r0 = reduce_mean{axes=[0]}(x)
          y = fused{nodes=[{op: {name: "reduce_mean", attributes: {axes: [1]}}, args: [-1]}, {op: {name: "add", attributes: {}}, args: [-2, 0]}]}(x, r0)
          @return(y)
    )");
}

TEST(fuse_pointwise_text, a_reduction_that_drops_dims_only_as_the_root) {
    expect_fused(R"(
        module main
          x = @param -> float32[2, 4]
          e = exp(x)
          r = reduce_sum{axes=[1], keepdims=false}(e)
          @return(r)
    )", R"(
        module main
          x = @param -> float32[2, 4]
          r = fused{nodes=[{op: {name: "exp", attributes: {}}, args: [-1]}, {op: {name: "reduce_sum", attributes: {axes: [1], keepdims: false}}, args: [0]}]}(x)
          @return(r)
    )");
    // Read by another op, it stays apart, and that op alone is no group.
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 4]
          r = reduce_sum{axes=[1], keepdims=false}(x)
          y = mul(r, r)
          @return(y)
    )");
}

TEST(fuse_pointwise_text, other_ops_split_chains_into_groups) {
    // matmul is neither pointwise nor a reduction: the chains before and after it are
    // groups of their own.
    expect_fused(R"(
        module main
          x = @param -> float32[2, 3]
          w = @param -> float32[3, 4]
          a = exp(x)
          b = neg(a)
          p = matmul(b, w)
          c = relu(p)
          d = sigmoid(c)
          @return(d)
    )", R"(
        module main
          x = @param -> float32[2, 3]
          w = @param -> float32[3, 4]
          b = fused{nodes=[{op: {name: "exp", attributes: {}}, args: [-1]}, {op: {name: "neg", attributes: {}}, args: [0]}]}(x)
          p = matmul(b, w)
          d = fused{nodes=[{op: {name: "relu", attributes: {}}, args: [-1]}, {op: {name: "sigmoid", attributes: {}}, args: [0]}]}(p)
          @return(d)
    )");
}

TEST(fuse_pointwise_text, values_read_outside_the_group_stay_outside) {
    // a is read by b and returned: it is not b's group's alone, and b alone is no group.
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 4]
          a = exp(x)
          b = neg(a)
          @return(b, a)
    )");
    // a is read by b and c, which are in one group: a joins it.
    expect_fused(R"(
        module main
          x = @param -> float32[2, 4]
          a = exp(x)
          b = neg(a)
          c = mul(a, b)
          @return(c)
    )", R"(
        module main
          x = @param -> float32[2, 4]
          c = fused{nodes=[{op: {name: "exp", attributes: {}}, args: [-1]}, {op: {name: "neg", attributes: {}}, args: [0]}, {op: {name: "mul", attributes: {}}, args: [0, 1]}]}(x)
          @return(c)
    )");
}

TEST(fuse_pointwise_text, integer_ops_and_log_sum_exp_stay) {
    // The default rules fuse floating-point ops only; reduce_log_sum_exp is no fusible
    // reduction (it shifts by the row's max first), so exp is left alone.
    expect_unchanged(R"(
        module main
          x = @param -> int32[2, 4]
          a = add(x, x)
          b = mul(a, a)
          @return(b)
    )");
    expect_unchanged(R"(
        module main
          x = @param -> float32[2, 4]
          a = exp(x)
          r = reduce_log_sum_exp{axes=[1]}(a)
          @return(r)
    )");
}

TEST(fuse_pointwise_text, options_reserved_min_size_and_reductions) {
    constexpr const char* before = R"(
        module main
          x = @param -> float32[2, 4]
          a = exp(x)
          b = neg(a)
          r = reduce_sum{axes=[1]}(b)
          @return(r)
    )";
    // Without reductions the root group is [a, b]; r stays.
    expect_fused(before, R"(
        module main
          x = @param -> float32[2, 4]
          b = fused{nodes=[{op: {name: "exp", attributes: {}}, args: [-1]}, {op: {name: "neg", attributes: {}}, args: [0]}]}(x)
          r = reduce_sum{axes=[1]}(b)
          @return(r)
    )", [](module& m) {
        fuse_pointwise f;
        f.reductions = false;
        f.apply(m);
    });
    // A group of three is below a minimum of four.
    expect_unchanged(before, [](module& m) {
        fuse_pointwise f;
        f.min_size = 4;
        f.apply(m);
    });
    // What a target claims (here the exp) is left alone: the group is [b, r].
    expect_fused(before, R"(
        module main
          x = @param -> float32[2, 4]
          a = exp(x)
          r = fused{nodes=[{op: {name: "neg", attributes: {}}, args: [-1]}, {op: {name: "reduce_sum", attributes: {axes: [1]}}, args: [0]}]}(a)
          @return(r)
    )", [](module& m) {
        fuse_pointwise f;
        f.reserved = [](module& mm) {
            std::unordered_set<const instruction*> s;
            for (auto& ins : mm)
                if (ins.get_operator().any_cast<op::exp_op>()) s.insert(&ins);
            return s;
        };
        f.apply(m);
    });
    // And what it cannot run (supported says no to neg) too: exp and the reduction are
    // then no chain, each alone.
    expect_unchanged(before, [](module& m) {
        fuse_pointwise f;
        f.supported = [](instruction_ref ins) { return !ins->get_operator().any_cast<op::neg_op>(); };
        f.apply(m);
    });
}

// Dynamic shapes (a generic program's), with `dynamic` on: dims broadcast as dynamic dims
// (equal ones or a fixed 1), reductions over trailing axes only.
namespace {

void fuse_dynamic(module& m) {
    fuse_pointwise f;
    f.dynamic = true;
    f.apply(m);
}

}  // namespace

TEST(fuse_pointwise_text, dynamic_layer_norm_and_bias_are_one_row_group) {
    pass_text::expect_rewrite(R"(
        module main
          x = @param -> float32[{batch=1:8}, {seq=1:64}, 4]
          g = @param -> float32[4]
          m = reduce_mean{axes=[2]}(x)
          d = sub(x, m)
          q = mul(d, d)
          v = reduce_mean{axes=[2]}(q)
          r = div(d, v)
          y = add(r, g)
          @return(y)
    )", fuse_dynamic, R"(
        module main
          x = @param -> float32[{batch=1:8}, {seq=1:64}, 4]
          g = @param -> float32[4]
          y = fused{nodes=[{op: {name: "reduce_mean", attributes: {axes: [2], keepdims: true, noop_with_empty_axes: false}}, args: [-1]}, {op: {name: "sub", attributes: {}}, args: [-1, 0]}, {op: {name: "mul", attributes: {}}, args: [1, 1]}, {op: {name: "reduce_mean", attributes: {axes: [2], keepdims: true, noop_with_empty_axes: false}}, args: [2]}, {op: {name: "div", attributes: {}}, args: [1, 3]}, {op: {name: "add", attributes: {}}, args: [4, -2]}]}(x, g)
          @return(y)
    )");
}

TEST(fuse_pointwise_text, dynamic_groups_need_the_option_trailing_axes_and_matching_dims) {
    const char* chain = R"(
        module main
          x = @param -> float32[{batch=1:8}, 4]
          a = exp(x)
          b = neg(a)
          @return(b)
    )";
    // Without `dynamic`: unchanged.
    pass_text::expect_unchanged(chain, [](module& m) { fuse_pointwise{}.apply(m); });
    // A reduction over a leading axis stays out of the group.
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[{batch=1:8}, 4]
          m = reduce_max{axes=[0]}(x)
          @return(m)
    )", fuse_dynamic);
    // A static reduction read only by a dynamic group stays apart (the group's kernel
    // reduces only its own trailing dynamic dims).
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[{batch=1:8}, 4]
          y = @param -> float32[4, 4]
          m = reduce_sum{axes=[0]}(y)
          z = add(x, m)
          @return(z)
    )", fuse_dynamic);
    // Two differently named dims do not broadcast to each other: two groups of one op
    // each, left alone (a group needs two ops).
    pass_text::expect_unchanged(R"(
        module main
          x = @param -> float32[{batch=1:8}, 4]
          y = @param -> float32[{rows=1:8}, 4]
          a = exp(y)
          b = add(x, a)
          @return(b)
    )", fuse_dynamic);
}
