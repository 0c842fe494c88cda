// Unit tests of kiln::program beyond program_test.cpp: modules, copies and moves
// (compiled too), parameter defaults, output names, metadata, memory usage, profiles,
// input checking, arena reuse across evals and concurrent evals.
#include "test_ops.hpp"

#include <kiln/program.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <thread>

using namespace kiln;

namespace {

const shape s23(type::float32, {2, 3});

program make_prog() {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", s23);
    auto y = m->add_parameter("y", s23);
    auto w = m->add_literal(literal(s23, std::vector<float>{1, -1, 2, -2, 3, -3}));
    auto a = m->add_instruction(test::test_add{}, {x, y});
    auto b = m->add_instruction(test::test_add{}, {a, w});
    auto c = m->add_instruction(test::test_scale{0.5f}, {b});
    m->add_return({m->add_instruction(test::test_add{}, {c, a})});
    return p;
}

argument random_arg(std::mt19937& rng) {
    std::uniform_real_distribution<float> d(-8.0f, 8.0f);
    argument a(s23);
    for (int i = 0; i < 6; ++i) a.data_as<float>()[i] = d(rng);
    return a;
}

// Independent reference: ((x + y + w) * 0.5) + (x + y).
std::vector<float> reference(const argument& x, const argument& y) {
    const float w[] = {1, -1, 2, -2, 3, -3};
    std::vector<float> out;
    for (int i = 0; i < 6; ++i) {
        float a = x.data_as<float>()[i] + y.data_as<float>()[i];
        out.push_back((a + w[i]) * 0.5f + a);
    }
    return out;
}

}  // namespace

TEST(core_program, modules) {
    program p;
    EXPECT_EQ(p.get_main_module()->name(), "main");
    auto* a = p.create_module("a");
    auto* b = p.create_module("b");
    EXPECT_THROW(p.create_module("a"), error);
    EXPECT_EQ(p.get_modules(), (std::vector<module_ref>{p.get_main_module(), a, b}));
    // Unreferenced modules come before main.
    auto post = p.get_modules_postorder();
    EXPECT_EQ(post.back(), p.get_main_module());
    EXPECT_EQ(post.size(), 3u);
    p.remove_module("a");
    EXPECT_FALSE(p.has_module("a"));
    EXPECT_EQ(p.get_modules().size(), 2u);
    try {
        p.remove_module("main");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
    }
    try {
        (void)p.get_module("zzz");
        FAIL();
    } catch (const error& e) {
        EXPECT_NE(e.message().find("'zzz'"), std::string::npos);
    }
    EXPECT_EQ(p.to_string(), "module main\n\nmodule b\n");
}

TEST(core_program, parameters_outputs_metadata) {
    auto p = make_prog();
    EXPECT_EQ(p.get_parameter_names(), (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(p.get_parameter_shapes().at("y"), s23);
    EXPECT_EQ(p.get_output_shapes(), std::vector<shape>{s23});
    EXPECT_EQ(p.get_output_names(), std::vector<std::string>{"output_0"});
    p.set_output_names({"result", "extra"});
    EXPECT_EQ(p.get_output_names(), std::vector<std::string>{"result"});  // one output
    EXPECT_TRUE(p.get_metadata().is_object());
    p.set_metadata(value{{"producer", "test"}, {"version", 3}});
    program q = p;
    EXPECT_EQ(q.get_metadata().at("version"), value(3));
    EXPECT_EQ(q.get_output_names(), std::vector<std::string>{"result"});
}

TEST(core_program, parameter_defaults) {
    auto p = make_prog();
    std::mt19937 rng(1);
    auto x = random_arg(rng), y = random_arg(rng);
    EXPECT_EQ(p.get_parameter_default("y"), nullptr);
    p.set_parameter_default("y", literal(y));
    ASSERT_NE(p.get_parameter_default("y"), nullptr);
    EXPECT_EQ(p.get_parameter_names(), (std::vector<std::string>{"x", "y"}));  // still listed
    p.compile(*get_target("ref"));
    EXPECT_EQ(p.eval({{"x", x}})[0].to_vector<float>(), reference(x, y));
    auto y2 = random_arg(rng);
    EXPECT_EQ(p.eval({{"x", x}, {"y", y2}})[0].to_vector<float>(), reference(x, y2));  // given wins
    try {
        (void)p.eval({{"y", y}});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(e.message().find("'x'"), std::string::npos);
        EXPECT_NE(e.message().find("float32[2, 3]"), std::string::npos);
    }
}

TEST(core_program, input_errors_name_input_and_expectation) {
    auto p = make_prog();
    p.compile(*get_target("ref"));
    std::mt19937 rng(2);
    auto x = random_arg(rng);
    try {
        (void)p.eval({{"x", x}, {"y", argument(shape(type::float64, {2, 3}))}});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::type);
        EXPECT_NE(e.message().find("'y'"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("float32"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("float64"), std::string::npos) << e.what();
    }
    try {
        (void)p.eval({{"x", x}, {"y", x}, {"z", x}});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(e.message().find("'z'"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("x, y"), std::string::npos) << e.what();  // lists the real inputs
    }
    try {
        (void)p.eval({{"x", x}, {"y", argument::make_tuple({x})}});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::shape) << e.what();
    }
}

TEST(core_program, memory_usage_and_internal_parameters) {
    auto p = make_prog();
    auto u0 = p.get_memory_usage();
    EXPECT_EQ(u0.arena_bytes, 0u);
    EXPECT_EQ(u0.parameter_bytes, 48u);
    EXPECT_EQ(u0.literal_bytes, 24u);
    EXPECT_EQ(u0.output_bytes, 24u);
    p.compile(*get_target("ref"));
    auto u = p.get_memory_usage();
    EXPECT_GT(u.arena_bytes, 0u);
    EXPECT_EQ(u.arena_bytes % 64, 0u);
    EXPECT_EQ(u.parameter_bytes, 48u);  // "#scratch" is not a caller's input
    EXPECT_EQ(u.output_bytes, 24u);
    EXPECT_EQ(p.get_parameter_names(), (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(p.get_parameter_shapes().count("#scratch"), 0u);
}

TEST(core_program, results_survive_later_evals) {
    auto p = make_prog();
    p.compile(*get_target("ref"));
    std::mt19937 rng(3);
    std::vector<std::vector<argument>> results;
    std::vector<std::vector<float>> expected;
    for (int i = 0; i < 5; ++i) {
        auto x = random_arg(rng), y = random_arg(rng);
        results.push_back(p.eval({{"x", x}, {"y", y}}));
        expected.push_back(reference(x, y));
    }
    // The arena is reused by every eval; earlier results must not change.
    for (int i = 0; i < 5; ++i) EXPECT_EQ(results[i][0].to_vector<float>(), expected[i]) << i;
}

TEST(core_program, concurrent_evals) {
    auto p = make_prog();
    p.compile(*get_target("ref"));
    std::vector<std::thread> threads;
    std::vector<int> bad(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937 rng(100 + t);
            for (int i = 0; i < 50; ++i) {
                auto x = random_arg(rng), y = random_arg(rng);
                if (p.eval({{"x", x}, {"y", y}})[0].to_vector<float>() != reference(x, y)) ++bad[t];
            }
        });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(bad, std::vector<int>(4, 0));
}

TEST(core_program, copies_of_compiled_programs_run_and_are_independent) {
    auto p = make_prog();
    p.compile(*get_target("ref"));
    program q = p;
    EXPECT_TRUE(q.is_compiled());
    EXPECT_EQ(q.target_name(), "ref");
    EXPECT_EQ(q, p);
    std::mt19937 rng(4);
    auto x = random_arg(rng), y = random_arg(rng);
    EXPECT_EQ(q.eval({{"x", x}, {"y", y}})[0].to_vector<float>(), reference(x, y));
    // Moves keep everything.
    program r = std::move(q);
    EXPECT_EQ(r.eval({{"x", x}, {"y", y}})[0].to_vector<float>(), reference(x, y));
    program s;
    s = r;
    EXPECT_EQ(s, p);
    s.get_main_module()->add_parameter("extra", s23);
    EXPECT_NE(s, p);
    EXPECT_EQ(p.get_parameter_names().size(), 2u);
}

TEST(core_program, profile_counts_each_instruction) {
    auto p = make_prog();
    p.compile(*get_target("ref"));
    std::mt19937 rng(5);
    auto x = random_arg(rng), y = random_arg(rng);
    std::vector<instruction_profile> prof;
    auto r = p.eval({{"x", x}, {"y", y}}, prof);
    EXPECT_EQ(r[0].to_vector<float>(), reference(x, y));
    ASSERT_FALSE(prof.empty());
    (void)p.eval({{"x", x}, {"y", y}}, prof);
    std::size_t kernels = 0;
    for (auto& e : prof) {
        EXPECT_EQ(e.module, "main");
        EXPECT_EQ(e.calls, 2u) << e.op_text;  // matched across the two calls
        EXPECT_GE(e.total_ms, 0.0);
        EXPECT_LT(e.index, p.get_main_module()->size());
        if (e.op_name.rfind("ref::kernel(", 0) == 0) ++kernels;  // names the wrapped op
    }
    EXPECT_EQ(kernels, 4u);  // four computing instructions
    EXPECT_TRUE(std::any_of(prof.begin(), prof.end(), [](auto& e) { return e.op_name == "ref::kernel(test_scale)"; }));
}

// Literals are immutable: a caller writing into a result that is (a view of) a
// constant must not change what later runs return.
TEST(core_program, returned_constants_are_the_callers_copy) {
    for (std::string target : {"", "ref", "cpu"}) {
        program p;
        auto* m = p.get_main_module();
        auto x = m->add_parameter("x", s23);
        auto c = m->add_literal(literal(s23, std::vector<float>{1, 2, 3, 4, 5, 6}));
        auto t = m->add_instruction(test::test_transpose{}, {c});
        m->add_return({c, t, m->add_instruction(test::test_add{}, {x, c})});
        if (!target.empty()) p.compile(*get_target(target));
        argument in(s23);
        auto r = p.eval({{"x", in}});
        r[0].data_as<float>()[0] = -100;
        r[1].data_as<float>()[1] = -200;
        auto again = p.eval({{"x", in}});
        EXPECT_EQ(again[0].to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6})) << target;
        EXPECT_EQ(again[1].to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6})) << target;
        EXPECT_EQ(again[2].to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6})) << target;
    }
}
