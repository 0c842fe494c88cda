#include "test_ops.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

namespace kiln::test {
KILN_REGISTER_OP(test_add)
KILN_REGISTER_OP(test_scale)
KILN_REGISTER_OP(test_transpose)
}  // namespace kiln::test

using namespace kiln;

namespace {
program make_chain() {
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {2, 3});
    auto x = m->add_parameter("x", s);
    auto y = m->add_parameter("y", s);
    auto a = m->add_instruction(test::test_add{}, {x, y});
    auto b = m->add_instruction(test::test_scale{2.0f}, {a});
    auto c = m->add_instruction(test::test_add{}, {b, a});
    m->add_return({c});
    return p;
}

param_map inputs() {
    shape s(type::float32, {2, 3});
    return {{"x", argument(literal(s, std::vector<float>{1, 2, 3, 4, 5, 6}).get_argument())},
            {"y", argument(literal(s, std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}).get_argument())}};
}
}  // namespace

TEST(program, eval_uncompiled) {
    auto p = make_chain();
    auto r = p.eval(inputs());
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{4.5f, 9, 13.5f, 18, 22.5f, 27}));
}

TEST(program, text_form) {
    auto p = make_chain();
    EXPECT_EQ(p.get_main_module()->to_string(),
              "module main\n"
              "  x = @param -> float32[2, 3]\n"
              "  y = @param -> float32[2, 3]\n"
              "  @2 = test_add(x, y) -> float32[2, 3]\n"
              "  @3 = test_scale{factor=2}(@2) -> float32[2, 3]\n"
              "  @4 = test_add(@3, @2) -> float32[2, 3]\n"
              "  @return(@4)\n");
}

TEST(program, compile_ref_plans_memory) {
    auto p = make_chain();
    p.compile(*get_target("ref"));
    auto r = p.eval(inputs());
    EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{4.5f, 9, 13.5f, 18, 22.5f, 27}));
    auto u = p.get_memory_usage();
    EXPECT_EQ(u.arena_bytes, 64u * 2);  // two 24-byte intermediates, live together, 64-aligned
    EXPECT_EQ(u.parameter_bytes, 48u);
    EXPECT_EQ(u.output_bytes, 24u);
    // Runs again with the same arena.
    EXPECT_EQ(p.eval(inputs())[0], r[0]);
}

TEST(program, errors_name_the_input) {
    auto p = make_chain();
    p.compile(*get_target("ref"));
    auto in = inputs();
    in.erase("y");
    try {
        p.eval(in);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(std::string(e.what()).find("'y'"), std::string::npos);
    }
    in = inputs();
    in["x"] = argument(shape(type::float32, {3, 2}));
    try {
        p.eval(in);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape);
        EXPECT_NE(std::string(e.what()).find("float32[2, 3]"), std::string::npos) << e.what();
    }
    in = inputs();
    in["x"] = argument(shape(type::int32, {2, 3}));
    EXPECT_THROW(p.eval(in), error);
    in = inputs();
    in["z"] = argument(shape(type::float32, {2, 3}));
    EXPECT_THROW(p.eval(in), error);
}

TEST(program, copy_is_deep) {
    auto p = make_chain();
    program q = p;
    EXPECT_EQ(p, q);
    q.get_main_module()->add_parameter("z", shape{});
    EXPECT_NE(p, q);
}

TEST(operation, attributes_from_reflect) {
    operation a = test::test_scale{2.0f};
    operation b = make_op("test_scale", {{"factor", 2.0}});
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.hash(), b.hash());
    EXPECT_EQ(a.to_string(), "test_scale{factor=2}");
    EXPECT_NE(a, operation(test::test_scale{3.0f}));
    EXPECT_EQ(a.get<test::test_scale>().factor, 2.0f);
    EXPECT_EQ(a.any_cast<test::test_add>(), nullptr);
}

TEST(operation, unknown_op_is_an_error) {
    try {
        make_op("no_such_op");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);
    }
}

TEST(operation, dynamic_shapes_inferred_generically) {
    std::vector<dynamic_dimension> dims{dynamic_dimension{1, 8, {}}, dynamic_dimension{3, 3, {}}};
    shape d = shape::make_dynamic(type::float32, dims);
    operation t = test::test_transpose{};
    // test_transpose has no dynamic support of its own.
    auto s = t.compute_shape({d});
    ASSERT_TRUE(s.dynamic());
    EXPECT_EQ(s.dyn_dims()[0], (dynamic_dimension{3, 3, {}}));
    EXPECT_EQ(s.dyn_dims()[1].min, 1u);
    EXPECT_EQ(s.dyn_dims()[1].max, 8u);
}

TEST(program, dynamic_inputs_specialize) {
    program p;
    auto* m = p.get_main_module();
    shape d = shape::make_dynamic(type::float32, {dynamic_dimension{1, 4, {}}, dynamic_dimension{2, 2, {}}});
    auto x = m->add_parameter("x", d);
    auto y = m->add_instruction(test::test_scale{3.0f}, {x});
    m->add_return({y});
    p.compile(*get_target("ref"));
    for (std::size_t n : {1u, 3u, 2u, 3u}) {
        std::vector<float> v(n * 2, 1.5f);
        auto r = p.eval({{"x", literal(shape(type::float32, {n, 2}), v).get_argument()}});
        EXPECT_EQ(r[0].get_shape().lens(), (std::vector<std::size_t>{n, 2}));
        EXPECT_EQ(r[0].to_vector<float>(), std::vector<float>(n * 2, 4.5f));
    }
    EXPECT_THROW(p.eval({{"x", argument(shape(type::float32, {5, 2}))}}), error);
}

TEST(program, compile_cpu_runs_everything) {
    auto p = make_chain();
    p.compile(*get_target("cpu"));
    EXPECT_EQ(p.target_name(), "cpu");
    auto r = p.eval(inputs());
    EXPECT_EQ(r[0].to_vector<float>(), (std::vector<float>{4.5f, 9, 13.5f, 18, 22.5f, 27}));
}
