// simplify_dynamic_ops: run-time forms whose shape inputs become known turn into
// static forms; shape_of of static tensors and fully known value-dependent ops become
// literals; results are unchanged.
#include "ops/tensor_gather.hpp"
#include "ops/tensor_generate.hpp"
#include "ops/tensor_select.hpp"
#include "ops/tensor_slice.hpp"
#include "ops/tensor_views.hpp"
#include "passes/simplify_dynamic_ops.hpp"
#include "tensor_test_util.hpp"

#include <kiln/pipeline.hpp>

using namespace kiln;
using namespace kiln::test;

namespace {
instruction_ref ints(module& m, const std::vector<std::int64_t>& v) {
    return m.add_literal(literal(shape(type::int64, {v.size()}), v));
}
std::size_t count_ops(const module& m, const std::string& name) {
    auto n = op_names(m);
    return static_cast<std::size_t>(std::count(n.begin(), n.end(), name));
}
void simplify(module& m) {
    simplify_dynamic_ops{}.apply(m);
    m.validate();
}
}  // namespace

TEST(simplify_dynamic_ops, reshape_with_literal_shape_becomes_static) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 3, 4}));
    auto r = m->add_instruction(op::reshape_dynamic{false}, {x, ints(*m, {4, -1})});
    auto t = m->add_instruction(op::transpose{{1, 0}}, {r});
    m->add_return({t});
    // Shape inference knows the literal's values already; the op is still the run-time form.
    EXPECT_EQ(t->get_shape().lens(), (std::vector<std::size_t>{6, 4}));
    auto in = random_arg(type::float32, {2, 3, 4}, 61);
    auto before = p.eval({{"x", in}})[0];
    simplify(*m);
    EXPECT_EQ(r->name(), "reshape");
    EXPECT_EQ(r->get_operator().get<op::reshape>().dims, (std::vector<std::int64_t>{4, -1}));
    EXPECT_EQ(r->inputs().size(), 1u);
    EXPECT_EQ(t->get_shape().lens(), (std::vector<std::size_t>{6, 4}));  // users see static shapes
    EXPECT_EQ(p.eval({{"x", in}})[0], before);
}

TEST(simplify_dynamic_ops, shape_arithmetic_chain_folds) {
    // Exporter pattern: reshape(y, concat(gather(shape(x), [1, 0]), [-1])).
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{2, 2, {}}, {1, 8, {}}}));
    auto y = m->add_parameter("y", shape(type::float32, {3, 2, 4}));
    auto s = m->add_instruction(op::shape_of{}, {x});
    auto g = m->add_instruction(op::gather{0}, {s, ints(*m, {1, 0})});
    auto c = m->add_instruction(op::concat{0}, {g, ints(*m, {-1})});
    auto r = m->add_instruction(op::reshape_dynamic{false}, {y, c});
    m->add_return({r});
    // Still dynamic: x's second dimension is unknown.
    simplify(*m);
    EXPECT_EQ(r->name(), "reshape_dynamic");
    EXPECT_EQ(s->name(), "shape_of");
    // Specialize x to [2, 3]: the chain becomes known and reshape static.
    m->set_parameter_shape("x", shape(type::float32, {2, 3}));
    simplify(*m);
    run_passes(*m, {make_pass("dce")});
    EXPECT_EQ(count_ops(*m, "reshape"), 1u);
    EXPECT_EQ(count_ops(*m, "reshape_dynamic"), 0u);
    EXPECT_EQ(count_ops(*m, "shape_of"), 0u);
    EXPECT_EQ(m->get_output_shapes()[0].lens(), (std::vector<std::size_t>{3, 2, 4}));
    auto yin = random_arg(type::float32, {3, 2, 4}, 62);
    auto out = p.eval({{"x", random_arg(type::float32, {2, 3}, 63)}, {"y", yin}})[0];
    expect_values(out, {3, 2, 4}, values(yin));
}

TEST(simplify_dynamic_ops, every_run_time_form_with_known_inputs) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {4, 6}));
    auto e = m->add_instruction(op::expand_dynamic{}, {m->add_instruction(op::slice{{0}, {0}, {1}, {}}, {x}), ints(*m, {3, 6})});
    auto sl = m->add_instruction(op::slice_dynamic{}, {x, ints(*m, {1}), ints(*m, {3}), ints(*m, {1})});
    auto pd = m->add_instruction(op::pad_dynamic{"edge", false, false}, {x, ints(*m, {1, 0, 0, 1})});
    auto tl = m->add_instruction(op::tile_dynamic{}, {x, ints(*m, {1, 2})});
    auto sq = m->add_instruction(op::squeeze_dynamic{true}, {x, ints(*m, {0})});
    auto tk = m->add_instruction(op::topk_dynamic{1, true, true}, {x, ints(*m, {2})});
    auto tk0 = m->add_instruction(builtin::get_tuple_elem{0}, {tk});
    auto sp = m->add_instruction(op::split_dynamic{1, 3}, {x});
    auto sp2 = m->add_instruction(builtin::get_tuple_elem{2}, {sp});
    auto cs = m->add_instruction(op::constant_of_shape{literal(2.5f)}, {ints(*m, {2, 2})});
    auto rg = m->add_instruction(op::range{}, {m->add_literal(literal(std::int64_t{0})), m->add_literal(literal(std::int64_t{5})),
                                               m->add_literal(literal(std::int64_t{2}))});
    auto nz = m->add_instruction(op::nonzero{}, {ints(*m, {0, 3, 0, 1})});
    m->add_return({e, sl, pd, tl, sq, tk0, sp2, cs, rg, nz});
    auto in = random_arg(type::float32, {4, 6}, 64);
    auto before = p.eval({{"x", in}});
    simplify(*m);
    EXPECT_EQ(e->name(), "broadcast");
    EXPECT_EQ(sl->name(), "slice");
    EXPECT_EQ(pd->name(), "pad");
    EXPECT_EQ(tl->name(), "tile");
    EXPECT_EQ(sq->name(), "unsqueeze");
    EXPECT_EQ(tk->name(), "topk");
    EXPECT_EQ(sp->name(), "split");
    EXPECT_EQ(cs->name(), "broadcast");
    for (auto& s : m->get_output_shapes()) EXPECT_FALSE(s.dynamic()) << s;
    EXPECT_EQ(tk0->get_shape().lens(), (std::vector<std::size_t>{4, 2}));
    EXPECT_EQ(sp2->get_shape().lens(), (std::vector<std::size_t>{4, 2}));
    // range and nonzero of literals became literals.
    run_passes(*m, {make_pass("dce")});
    EXPECT_EQ(count_ops(*m, "range"), 0u);
    EXPECT_EQ(count_ops(*m, "nonzero"), 0u);
    auto after = p.eval({{"x", in}});
    ASSERT_EQ(before.size(), after.size());
    for (std::size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i], after[i]) << "output " << i;
}

TEST(simplify_dynamic_ops, shape_of_fixed_dims_of_a_dynamic_tensor_folds) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {{1, 8, {}}, {3, 3, {}}, {5, 5, {}}}));
    auto tail = m->add_instruction(op::shape_of{1, std::nullopt}, {x});
    auto all = m->add_instruction(op::shape_of{}, {x});
    m->add_return({tail, all});
    simplify(*m);
    run_passes(*m, {make_pass("dce")});
    EXPECT_EQ(count_ops(*m, "shape_of"), 1u);  // the full shape still depends on the batch
    auto r = p.eval({{"x", random_arg(type::float32, {2, 3, 5}, 66)}});
    expect_values(r[0], {2}, {3, 5});
    expect_values(r[1], {3}, {2, 3, 5});
}

TEST(simplify_dynamic_ops, leaves_run_time_values_alone) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 3}));
    auto s = m->add_parameter("s", shape(type::int64, {1}));
    auto r = m->add_instruction(op::reshape_dynamic{false}, {x, s});
    auto nz = m->add_instruction(op::nonzero{}, {x});
    m->add_return({r, nz});
    simplify(*m);
    EXPECT_EQ(r->name(), "reshape_dynamic");
    EXPECT_EQ(nz->name(), "nonzero");
}

TEST(simplify_dynamic_ops, invalid_known_values_are_left_for_run_time) {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape(type::float32, {2, 3}));
    auto r = m->add_instruction(op::reshape_dynamic{false}, {x, ints(*m, {4})});
    m->add_return({r});
    EXPECT_NO_THROW(simplify(*m));
    EXPECT_EQ(r->name(), "reshape_dynamic");
    EXPECT_THROW(p.eval({{"x", random_arg(type::float32, {2, 3}, 65)}}), error);
}

TEST(simplify_dynamic_ops, is_in_the_pass_table) {
    auto names = get_pass_names();
    EXPECT_NE(std::find(names.begin(), names.end(), "simplify_dynamic_ops"), names.end());
    EXPECT_EQ(make_pass("simplify_dynamic_ops").name(), "simplify_dynamic_ops");
}
