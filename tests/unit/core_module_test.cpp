// Unit tests of kiln::module and kiln::instruction: text form, insertion, replacement
// and removal keeping use lists consistent, validate(), deep copies, sub-modules.
#include "test_ops.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/module.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

#include <algorithm>

using namespace kiln;

namespace {
const shape s23(type::float32, {2, 3});

bool uses(instruction_ref user, instruction_ref used) {
    auto& in = user->inputs();
    auto& out = used->outputs();
    return std::find(in.begin(), in.end(), used) != in.end() && std::find(out.begin(), out.end(), user) != out.end();
}

// Runs a sub-module on the op's inputs (parameters "p0", "p1", ...).
struct call_op {
    std::string name() const { return "core_test_call"; }
    shape compute_shape(const std::vector<shape>&, const std::vector<module_ref>& mods) const {
        if (mods.size() != 1) throw_error(error_code::shape, "core_test_call: one module");
        return mods[0]->get_output_shapes().at(0);
    }
    argument compute(const shape&, const std::vector<argument>& args, const std::vector<module_ref>& mods,
                     const run_module_fn& run) const {
        param_map p;
        for (std::size_t i = 0; i < args.size(); ++i) p["p" + std::to_string(i)] = args[i];
        return run(mods[0], p).at(0);
    }
};
}  // namespace

TEST(core_module, text_form_exact) {
    module m("body");
    auto x = m.add_parameter("x", s23);
    auto l = m.add_literal(literal(s23, std::vector<float>{1, 2, 3, 4, 5, 6.5f}));
    auto a = m.add_instruction(test::test_add{}, {x, l});
    auto t = m.add_instruction(test::test_transpose{}, {a});
    auto g = m.add_instruction(test::test_scale{0.5f}, {t});
    m.add_return({g, a});
    EXPECT_EQ(m.name(), "body");
    EXPECT_EQ(m.to_string(),
              "module body\n"
              "  x = @param -> float32[2, 3]\n"
              "  @1 = @literal{float32[2, 3] {1, 2, 3, 4, 5, 6.5}} -> float32[2, 3]\n"
              "  @2 = test_add(x, @1) -> float32[2, 3]\n"
              "  @3 = test_transpose(@2) -> float32[3, 2]{1, 3}\n"
              "  @4 = test_scale{factor=0.5}(@3) -> float32[3, 2]\n"
              "  @return(@4, @2)\n");
    std::ostringstream os;
    os << m;
    EXPECT_EQ(os.str(), m.to_string());
    EXPECT_EQ(m.size(), 6u);
    EXPECT_EQ(m.instruction_name(&*x), "x");
    EXPECT_EQ(m.instruction_name(&*g), "@4");
    EXPECT_EQ(m.index_of(g), 4u);
    EXPECT_TRUE(m.has_instruction(g));
    EXPECT_EQ(m.get_output_shapes(), (std::vector<shape>{shape(type::float32, {3, 2}), s23}));
    EXPECT_EQ(m.get_parameter_names(), std::vector<std::string>{"x"});
    EXPECT_EQ(m.get_parameter_shapes().at("x"), s23);
    EXPECT_EQ(m.get_parameter("x"), x);
    EXPECT_EQ(m.get_parameter("nope"), m.end());
    EXPECT_EQ(std::next(m.get_return()), m.end());
    EXPECT_TRUE(m.get_return()->is_return());
    EXPECT_NO_THROW(m.validate());
}

TEST(core_module, instructions_know_their_uses) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto y = m.add_parameter("y", s23);
    auto a = m.add_instruction(test::test_add{}, {x, y});
    auto b = m.add_instruction(test::test_add{}, {a, a});
    m.add_return({b});
    EXPECT_TRUE(x->is_param());
    EXPECT_EQ(x->param_name(), "x");
    EXPECT_EQ(a->param_name(), "");
    EXPECT_EQ(a->name(), "test_add");
    EXPECT_EQ(a->outputs().size(), 1u);  // b uses a twice, listed once
    EXPECT_TRUE(uses(b, a));
    EXPECT_EQ(b->inputs().size(), 2u);
    EXPECT_EQ(a->recompute_shape(), s23);
    EXPECT_EQ(to_shapes({x, a}), (std::vector<shape>{s23, s23}));
    auto l = m.add_literal(literal(2.0f));
    EXPECT_TRUE(l->is_literal());
    EXPECT_EQ(l->get_literal(), literal(2.0f));
    EXPECT_EQ(l->recompute_shape(), shape());
}

TEST(core_module, adding_validates_shapes_and_names) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto y = m.add_parameter("y", shape(type::float32, {3, 2}));
    EXPECT_THROW(m.add_instruction(test::test_add{}, {x, y}), error);
    EXPECT_EQ(m.size(), 2u);  // nothing was added
    try {
        m.add_parameter("x", s23);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(e.message().find("'x'"), std::string::npos);
    }
    m.add_return({x});
    EXPECT_THROW(m.add_return({y}), error);
}

TEST(core_module, insert_keeps_order_and_uses) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto r = m.add_return({x});
    auto s = m.insert_instruction(r, test::test_scale{3.0f}, {x});
    m.replace_argument(r, x, s);
    EXPECT_EQ(m.index_of(s), 1u);
    EXPECT_TRUE(uses(s, x));
    EXPECT_TRUE(uses(r, s));
    EXPECT_TRUE(std::find(x->outputs().begin(), x->outputs().end(), r) == x->outputs().end());
    auto p = m.insert_parameter(m.begin(), "w", s23);
    EXPECT_EQ(m.get_parameter_names(), (std::vector<std::string>{"w", "x"}));
    auto lit = m.insert_literal(s, literal(s23, std::vector<float>(6, 1.0f)));
    auto a = m.insert_instruction(s, test::test_add{}, {p, lit});
    EXPECT_EQ(m.index_of(a), 3u);
    EXPECT_NO_THROW(m.validate());
    // With an explicit shape (loader path); validate compares it with the computed one.
    auto wrong = m.insert_instruction_with_shape(r, test::test_scale{}, shape(type::float32, {6}), {a});
    EXPECT_EQ(wrong->get_shape(), shape(type::float32, {6}));
    try {
        m.validate();
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::runtime);
        EXPECT_NE(e.message().find("float32[6]"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("test_scale"), std::string::npos) << e.what();
    }
    m.remove_instruction(wrong);
    EXPECT_NO_THROW(m.validate());
}

TEST(core_module, replace_instruction_in_place_updates_user_shapes) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto y = m.add_parameter("y", s23);
    auto a = m.add_instruction(test::test_add{}, {x, y});
    auto b = m.add_instruction(test::test_scale{2.0f}, {a});
    m.add_return({b});
    // Same shape: new op and inputs, users untouched.
    m.replace_instruction(a, test::test_scale{4.0f}, {y});
    EXPECT_EQ(a->get_operator(), operation(test::test_scale{4.0f}));
    EXPECT_TRUE(uses(a, y));
    EXPECT_TRUE(std::find(x->outputs().begin(), x->outputs().end(), a) == x->outputs().end());
    EXPECT_TRUE(uses(b, a));
    // Shape change propagates to users.
    m.replace_instruction(a, test::test_transpose{}, {x});
    EXPECT_EQ(a->get_shape(), shape(type::float32, {3, 2}, {1, 3}));
    EXPECT_EQ(b->get_shape(), shape(type::float32, {3, 2}));
    EXPECT_EQ(m.get_output_shapes()[0], shape(type::float32, {3, 2}));
    EXPECT_NO_THROW(m.validate());
    // A failing replacement changes nothing.
    auto before = m.to_string();
    EXPECT_THROW(m.replace_instruction(a, test::test_add{}, {x, a}), error);
    EXPECT_EQ(m.to_string(), before);
    EXPECT_NO_THROW(m.validate());
}

TEST(core_module, replace_with_other_instruction_and_remove) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto a = m.add_instruction(test::test_scale{2.0f}, {x});
    auto b = m.add_instruction(test::test_add{}, {a, x});
    auto c = m.add_instruction(test::test_add{}, {a, b});
    auto r = m.add_return({c, a});
    auto n = m.insert_instruction(b, test::test_scale{3.0f}, {a});  // uses a: must keep using it
    m.replace_instruction(a, n);
    EXPECT_TRUE(uses(n, a));
    EXPECT_TRUE(uses(b, n));
    EXPECT_TRUE(uses(c, n));
    EXPECT_TRUE(uses(r, n));
    EXPECT_EQ(a->outputs().size(), 1u);  // only n
    EXPECT_NO_THROW(m.validate());
    try {
        m.remove_instruction(a);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::runtime);
        EXPECT_NE(e.message().find("@1"), std::string::npos) << e.what();
    }
    // Replacing with a different shape recomputes users.
    auto t = m.insert_instruction(b, test::test_transpose{}, {x});
    auto t2 = m.insert_instruction(b, test::test_transpose{}, {t});
    EXPECT_EQ(t2->get_shape().lens(), s23.lens());
    m.remove_instruction(t2);
    m.remove_instruction(t);
    EXPECT_EQ(std::prev(b), n);
    EXPECT_THROW(m.remove_instruction(n), error);  // n has users
    EXPECT_NO_THROW(m.validate());
}

TEST(core_module, remove_returns_next_and_unlinks_inputs) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto a = m.add_instruction(test::test_scale{2.0f}, {x});
    auto b = m.add_instruction(test::test_scale{3.0f}, {x});
    m.add_return({b});
    auto next = m.remove_instruction(a);
    EXPECT_EQ(next, b);
    EXPECT_EQ(x->outputs().size(), 1u);
    EXPECT_EQ(m.size(), 3u);
    EXPECT_NO_THROW(m.validate());
}

TEST(core_module, move_instruction_and_validate_ssa) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto a = m.add_instruction(test::test_scale{2.0f}, {x});
    auto b = m.add_instruction(test::test_scale{3.0f}, {a});
    auto r = m.add_return({b});
    m.move_instruction(b, a);  // b now before its input a
    try {
        m.validate();
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::runtime);
        EXPECT_NE(e.message().find("not defined before"), std::string::npos) << e.what();
    }
    m.move_instruction(a, b);
    EXPECT_NO_THROW(m.validate());
    // @return must be last.
    m.move_instruction(r, b);
    EXPECT_THROW(m.validate(), error);
    m.move_instruction(r, m.end());
    EXPECT_NO_THROW(m.validate());
}

TEST(core_module, validate_catches_broken_use_lists_and_shapes) {
    {
        module m;
        auto x = m.add_parameter("x", s23);
        auto a = m.add_instruction(test::test_scale{2.0f}, {x});
        m.add_return({a});
        // Change the parameter's shape behind the users' back via set_parameter_shape:
        // users are recomputed, so still valid.
        m.set_parameter_shape("x", shape(type::float32, {4}));
        EXPECT_EQ(a->get_shape(), shape(type::float32, {4}));
        EXPECT_NO_THROW(m.validate());
        EXPECT_THROW(m.set_parameter_shape("nope", s23), error);
    }
    {
        // A stored shape that no longer matches (inserted with a wrong shape) is caught.
        module m;
        auto x = m.add_parameter("x", s23);
        auto y = m.add_parameter("y", shape(type::float32, {3}));
        auto bad = m.insert_instruction_with_shape(m.end(), test::test_add{}, s23, {x, y});
        m.add_return({bad});
        try {
            m.validate();
            FAIL();
        } catch (const error& e) {
            EXPECT_NE(e.message().find("shape no longer valid"), std::string::npos) << e.what();
            EXPECT_NE(e.message().find("invalid module main"), std::string::npos) << e.what();
        }
    }
}

TEST(core_module, copy_into_is_deep_and_maps_modules) {
    program p;
    auto* main = p.get_main_module();
    auto* sub = p.create_module("sub");
    auto sp = sub->add_parameter("p0", s23);
    sub->add_return({sub->add_instruction(test::test_scale{2.0f}, {sp})});
    auto x = main->add_parameter("x", s23);
    auto c = main->add_instruction(call_op{}, {x}, {sub});
    main->add_literal(literal(1.0f));
    main->add_return({c});
    EXPECT_EQ(c->module_inputs(), std::vector<module_ref>{sub});
    EXPECT_NE(main->to_string().find("core_test_call(x) [sub]"), std::string::npos) << main->to_string();

    module sub2("sub2");
    sub->copy_into(sub2);
    std::unordered_map<const module*, module_ref> mods{{sub, &sub2}};
    module dst("copy");
    auto map = main->copy_into(dst, &mods);
    EXPECT_EQ(map.size(), main->size());
    EXPECT_EQ(dst.size(), main->size());
    auto cc = map.at(&*c);
    EXPECT_EQ(cc->module_inputs(), std::vector<module_ref>{&sub2});
    EXPECT_EQ(cc->inputs().at(0), map.at(&*x));
    EXPECT_NE(&*cc, &*c);
    EXPECT_NO_THROW(dst.validate());
    // Without a map, module references are kept.
    module keep;
    auto m2 = main->copy_into(keep);
    EXPECT_EQ(m2.at(&*c)->module_inputs(), std::vector<module_ref>{sub});
    EXPECT_EQ(keep.to_string().substr(keep.to_string().find('\n')), main->to_string().substr(main->to_string().find('\n')));
    // Changing the copy leaves the original alone.
    keep.replace_instruction(m2.at(&*c), test::test_scale{5.0f}, {m2.at(&*x)});
    EXPECT_EQ(c->name(), "core_test_call");
    EXPECT_EQ(x->outputs().size(), 1u);
}

TEST(core_module, program_sub_modules_run_and_copy_deeply) {
    program p;
    auto* sub = p.create_module("sub");
    auto sp = sub->add_parameter("p0", s23);
    sub->add_return({sub->add_instruction(test::test_scale{2.0f}, {sp})});
    auto* main = p.get_main_module();
    auto x = main->add_parameter("x", s23);
    main->add_return({main->add_instruction(call_op{}, {x}, {sub})});
    EXPECT_TRUE(p.has_module("sub"));
    EXPECT_FALSE(p.has_module("other"));
    EXPECT_EQ(p.get_module("sub"), sub);
    EXPECT_THROW((void)p.get_module("other"), error);
    EXPECT_EQ(p.get_modules(), (std::vector<module_ref>{main, sub}));
    EXPECT_EQ(p.get_modules_postorder(), (std::vector<module_ref>{sub, main}));

    argument in(s23);
    for (int i = 0; i < 6; ++i) in.data_as<float>()[i] = 0.5f + static_cast<float>(i);
    auto r = p.eval({{"x", in}});
    EXPECT_EQ(r.at(0).to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11}));

    program q = p;  // deep: the copy's call refers to the copy's sub-module
    auto* qsub = q.get_module("sub");
    EXPECT_NE(qsub, sub);
    auto qcall = std::prev(q.get_main_module()->get_return());
    EXPECT_EQ(qcall->module_inputs(), std::vector<module_ref>{qsub});
    qsub->replace_instruction(std::prev(qsub->get_return()), test::test_scale{10.0f}, {qsub->get_parameter("p0")});
    EXPECT_EQ(q.eval({{"x", in}}).at(0).to_vector<float>()[0], 5.0f);
    EXPECT_EQ(p.eval({{"x", in}}).at(0).to_vector<float>()[0], 1.0f);
    EXPECT_NE(p, q);
}

TEST(core_module, equality_is_by_text) {
    auto build = [](float f) {
        auto m = std::make_unique<module>();
        auto x = m->add_parameter("x", s23);
        m->add_return({m->add_instruction(test::test_scale{f}, {x})});
        return m;
    };
    EXPECT_EQ(*build(2.0f), *build(2.0f));
    EXPECT_NE(*build(2.0f), *build(3.0f));
}

TEST(core_module, replace_argument_of_a_non_input_is_refused) {
    module m;
    auto x = m.add_parameter("x", s23);
    auto y = m.add_parameter("y", s23);
    auto z = m.add_parameter("z", s23);
    auto a = m.add_instruction(test::test_add{}, {x, y});
    m.add_return({a});
    EXPECT_THROW(m.replace_argument(a, z, x), error);  // z is not an input of a
    EXPECT_NO_THROW(m.validate());
    EXPECT_TRUE(z->outputs().empty());
    EXPECT_EQ(x->outputs().size(), 1u);
    // The real thing works and keeps the lists in sync.
    m.replace_argument(a, y, z);
    EXPECT_TRUE(uses(a, z));
    EXPECT_TRUE(y->outputs().empty());
    EXPECT_NO_THROW(m.validate());
}

TEST(core_module, a_module_in_use_cannot_be_removed) {
    program p;
    auto* sub = p.create_module("sub");
    auto sp = sub->add_parameter("p0", s23);
    sub->add_return({sub->add_instruction(test::test_scale{2.0f}, {sp})});
    auto* main = p.get_main_module();
    auto x = main->add_parameter("x", s23);
    auto c = main->add_instruction(call_op{}, {x}, {sub});
    main->add_return({c});
    try {
        p.remove_module("sub");
        FAIL() << "removed a module that main still calls";
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(e.message().find("'sub'"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("main"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(p.has_module("sub"));
    argument in(s23);
    EXPECT_NO_THROW((void)p.eval({{"x", in}}));
    // Once unused it can go.
    main->replace_instruction(c, test::test_scale{1.0f}, {x});
    p.remove_module("sub");
    EXPECT_FALSE(p.has_module("sub"));
}

TEST(core_module, validate_reports_any_shape_failure_as_a_kiln_error) {
    program p;
    auto* sub = p.create_module("sub");
    auto sp = sub->add_parameter("p0", s23);
    auto r = sub->add_return({sub->add_instruction(test::test_scale{2.0f}, {sp})});
    auto* main = p.get_main_module();
    auto x = main->add_parameter("x", s23);
    main->add_return({main->add_instruction(call_op{}, {x}, {sub})});
    EXPECT_NO_THROW(main->validate());
    // The sub-module is emptied: call_op's shape function now fails with
    // std::out_of_range, which validate must still report as a broken module.
    auto body = std::prev(r);
    sub->remove_instruction(r);
    sub->remove_instruction(body);
    sub->remove_instruction(sp);
    ASSERT_EQ(sub->size(), 0u);
    try {
        main->validate();
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::runtime);
        EXPECT_NE(e.message().find("core_test_call"), std::string::npos) << e.what();
    }
}

// Replacing a value changes its users' shapes in program order: a Concat of two users of
// one value is recomputed once both are, never between them (where they disagree and the
// Concat cannot be shaped: Mask R-CNN's anchors, once the image size was known, threw there
// and left one input's shape stale).
TEST(core_module, users_are_recomputed_after_all_their_changed_inputs) {
    module m("main");
    auto p = m.add_parameter("p", shape::make_dynamic(type::int32, {dynamic_dimension{1, 100, {}}}));
    auto r = m.add_instruction(make_op("reshape", {{"dims", {-1}}}), {p});
    auto u1 = m.add_instruction(make_op("unsqueeze", {{"axes", {1}}}), {r});
    auto u2 = m.add_instruction(make_op("unsqueeze", {{"axes", {1}}}), {r});
    auto c = m.add_instruction(make_op("concat", {{"axis", 1}}), {u1, u2});
    m.add_return(std::vector<instruction_ref>{c});
    auto sizes = m.insert_literal(r, literal(shape(type::int32, {200}), std::vector<std::int32_t>(200, 7)));
    m.replace_instruction(r, sizes);
    EXPECT_EQ(u1->get_shape(), shape(type::int32, {200, 1}));
    EXPECT_EQ(u2->get_shape(), shape(type::int32, {200, 1}));
    EXPECT_EQ(c->get_shape(), shape(type::int32, {200, 2}));
}
