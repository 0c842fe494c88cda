// The fusion pass: which instructions it groups, which it must leave alone, and that a
// fused instruction computes exactly what its ops computed (reference computes, bitwise).
#include "cpu_codegen_util.hpp"

#include "passes/fuse_pointwise.hpp"
#include "targets/cpu/codegen/lowering.hpp"

#include <kiln/pass.hpp>

using namespace kiln;
using namespace kiln::test;

namespace {

// Runs the pass on a copy and checks: the expected number of fused instructions, and
// equal results (bit for bit) against the unfused program, both evaluated with the
// reference computes.
program fuse_and_check(const program& p, std::size_t want_fused, const param_map& in, fuse_pointwise pass = {}) {
    program f = p;
    run_passes(*f.get_main_module(), {pass});
    f.get_main_module()->validate();
    EXPECT_EQ(count_ops(*f.get_main_module(), "fused"), want_fused) << *f.get_main_module();
    auto a = p.eval(in);
    auto b = f.eval(in);
    EXPECT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) EXPECT_EQ(a[i], b[i]) << "output " << i;
    return f;
}

const op::fused& only_fused(const program& p) {
    for (auto& ins : *p.get_main_module())
        if (ins.name() == "fused") return ins.get_operator().get<op::fused>();
    throw std::runtime_error("no fused instruction");
}

}  // namespace

TEST(fuse_pointwise, chain_with_broadcast_becomes_one_instruction) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4, 3, 8}));
    auto b = m->add_parameter("b", shape(type::float32, {3, 1}));
    auto y = add_op(*m, "add", {x, b});
    y = add_op(*m, "mul", {y, scalar(*m, 0.5f)});
    y = add_op(*m, "tanh", {y});
    y = add_op(*m, "sub", {y, x});
    m->add_return({add_op(*m, "relu", {y})});
    auto f = fuse_and_check(p, 1, {{"x", random_arg(shape(type::float32, {4, 3, 8}), 1)},
                                    {"b", random_arg(shape(type::float32, {3, 1}), 2)}});
    // No elementwise op is left outside; the scalar literal moved into the body.
    for (const char* n : {"add", "mul", "tanh", "sub", "relu"}) EXPECT_EQ(count_ops(*f.get_main_module(), n), 0u) << n;
    const auto& body = only_fused(f);
    EXPECT_EQ(body.nodes.size(), 6u);
    EXPECT_EQ(body.nodes[0].op.name(), "fused_literal");
}

TEST(fuse_pointwise, layer_norm_pattern_is_one_group) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {2, 5, 16});
    auto x = m->add_parameter("x", xs);
    auto g = m->add_literal(literal(shape(type::float32, {16}), std::vector<float>(16, 1.5f)));
    auto b = m->add_literal(literal(shape(type::float32, {16}), std::vector<float>(16, -0.25f)));
    m->add_return({layer_norm(*m, x, g, b)});
    auto f = fuse_and_check(p, 1, {{"x", random_arg(xs, 3)}});
    const auto& body = only_fused(f);
    std::size_t reductions = 0;
    for (auto& n : body.nodes) reductions += n.op.name() == "reduce_mean" ? 1 : 0;
    EXPECT_EQ(reductions, 2u);
}

TEST(fuse_pointwise, softmax_gelu_silu_patterns) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {3, 7, 10});
    auto x = m->add_parameter("x", xs);
    auto y = m->add_parameter("y", xs);
    auto z = m->add_parameter("z", xs);
    m->add_return({softmax(*m, x), gelu(*m, y), silu(*m, z)});
    fuse_and_check(p, 3, {{"x", random_arg(xs, 4)}, {"y", random_arg(xs, 5)}, {"z", random_arg(xs, 6)}});
}

TEST(fuse_pointwise, mean_and_variance_alone_form_a_row_group) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {6, 32});
    auto x = m->add_parameter("x", xs);
    auto mean = add_op(*m, "reduce_mean", {x}, reduce_attrs({1}));
    auto d = add_op(*m, "sub", {x, mean});
    auto var = add_op(*m, "reduce_mean", {add_op(*m, "mul", {d, d})}, reduce_attrs({1}));
    auto rstd = add_op(*m, "reciprocal", {add_op(*m, "sqrt", {add_op(*m, "add", {var, scalar(*m, 1e-3f)})})});
    m->add_return({rstd});
    fuse_and_check(p, 1, {{"x", random_arg(xs, 7)}});
}

TEST(fuse_pointwise, intermediates_needed_elsewhere_stay_outside) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {4, 4});
    auto x = m->add_parameter("x", xs);
    auto a = add_op(*m, "exp", {x});
    auto b = add_op(*m, "add", {a, scalar(*m, 1.0f)});
    auto c = add_op(*m, "log", {b});
    auto t = m->add_instruction(make_op("transpose", {{"perm", {1, 0}}}), {b});  // not pointwise: uses b too
    m->add_return({c, t, a});  // a is a program output
    auto f = fuse_and_check(p, 0, {{"x", random_arg(xs, 8)}});
    // exp (a program output) and add (used by the transpose) cannot hide inside a group;
    // log alone is not worth a group.
    EXPECT_EQ(count_ops(*f.get_main_module(), "exp"), 1u);
    EXPECT_EQ(count_ops(*f.get_main_module(), "log"), 1u);
}

TEST(fuse_pointwise, reductions_over_other_axes_split_groups) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {5, 6, 7});
    auto x = m->add_parameter("x", xs);
    auto e = add_op(*m, "exp", {x});
    auto s1 = add_op(*m, "reduce_sum", {e}, reduce_attrs({2}));
    auto n = add_op(*m, "div", {e, s1});
    auto s2 = add_op(*m, "reduce_max", {n}, reduce_attrs({1}));  // another axis
    m->add_return({add_op(*m, "neg", {s2})});
    // neg(max(div(...))) is one group; the sum over the other axis cannot join it, and
    // exp then has users in two groups: both stay single ops.
    auto f = fuse_and_check(p, 1, {{"x", random_arg(xs, 9)}});
    EXPECT_EQ(count_ops(*f.get_main_module(), "reduce_sum"), 1u);
    EXPECT_EQ(count_ops(*f.get_main_module(), "exp"), 1u);
}

TEST(fuse_pointwise, dropped_dims_only_at_the_root) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {3, 9});
    auto x = m->add_parameter("x", xs);
    auto sq = add_op(*m, "mul", {x, x});
    auto s = add_op(*m, "reduce_sum", {sq}, reduce_attrs({1}, false));
    m->add_return({add_op(*m, "sqrt", {s})});
    // sum(x*x) with keepdims=0 ends a group; sqrt of it is a group of one (left alone).
    auto f = fuse_and_check(p, 1, {{"x", random_arg(xs, 10)}});
    EXPECT_EQ(count_ops(*f.get_main_module(), "sqrt"), 1u);
}

TEST(fuse_pointwise, leaves_post_op_chains_of_a_matmul_alone) {
    program p;
    auto* m = p.get_main_module();
    auto a = m->add_parameter("a", shape(type::float32, {8, 16}));
    auto w = m->add_literal(literal(shape(type::float32, {16, 12}), std::vector<float>(16 * 12, 0.125f)));
    auto bias = m->add_literal(literal(shape(type::float32, {12}), std::vector<float>(12, 0.5f)));
    auto mm = add_op(*m, "matmul", {a, w});
    auto y = add_op(*m, "add", {mm, bias});
    auto g = gelu(*m, y);                        // post-ops of the matmul
    auto z = add_op(*m, "mul", {add_op(*m, "exp", {g}), scalar(*m, 3.0f)});  // exp: still a post-op ...
    auto r = add_op(*m, "reduce_sum", {z}, reduce_attrs({1}));          // ... the chain stops at the reduction
    m->add_return({add_op(*m, "sqrt", {r})});
    fuse_pointwise pass;
    pass.reserved = [](module& mod) { return cpu::codegen::post_op_chains(mod); };
    auto f = fuse_and_check(p, 1, {{"a", random_arg(shape(type::float32, {8, 16}), 11)}}, pass);
    EXPECT_EQ(count_ops(*f.get_main_module(), "erf"), 1u);
    EXPECT_EQ(count_ops(*f.get_main_module(), "exp"), 1u);
    const auto& body = only_fused(f);
    EXPECT_EQ(body.nodes.back().op.name(), "sqrt");
}

TEST(fuse_pointwise, fused_body_round_trips_through_values) {
    program p;
    auto* m = p.get_main_module();
    const shape xs(type::float32, {2, 8});
    auto x = m->add_parameter("x", xs);
    m->add_return({layer_norm(*m, x, scalar(*m, 2.0f), scalar(*m, 1.0f))});
    auto f = fuse_and_check(p, 1, {{"x", random_arg(xs, 12)}});
    const operation o = only_fused(f);
    const operation back = make_op("fused", o.to_value());
    EXPECT_EQ(back, o);
    // A malformed body is a shape error naming the node, not a crash.
    op::fused bad = only_fused(f);
    bad.nodes[3].args = {7};
    EXPECT_THROW(bad.compute_shape({xs}), error);
}
