// The pass manager (validation, tracing, timing) and the pipeline wiring.
#include "passes_test_util.hpp"
#include "test_ops.hpp"

#include <kiln/pass.hpp>
#include <kiln/pipeline.hpp>

#include <gtest/gtest.h>

#include <algorithm>

using namespace kiln;

namespace {

shape s23() { return shape(type::float32, {2, 3}); }

// A broken pass: moves the last computed instruction before its inputs.
struct break_ssa {
    std::string name() const { return "break_ssa"; }
    void apply(module& m) const {
        auto last = std::prev(m.get_return());
        m.move_instruction(last, m.begin());
    }
};

struct do_nothing {
    std::string name() const { return "do_nothing"; }
    void apply(module&) const {}
};

program small_program() {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", s23());
    auto a = m.add_instruction(test::test_scale{2}, {x});
    m.add_return({m.add_instruction(test::test_scale{3}, {a})});
    return p;
}

}  // namespace

TEST(pass_manager, tests_validate_after_each_pass) {
    // validate_passes_in_tests.cpp turns validation on for this binary.
    EXPECT_TRUE(pass_options_from_env().validate);
}

TEST(pass_manager, validation_names_the_broken_pass) {
    auto p = small_program();
    pass_options o;
    o.validate = true;
    try {
        run_passes(p, {do_nothing{}, break_ssa{}}, o);
        FAIL() << "no error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("after pass break_ssa"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("not defined before it"), std::string::npos) << e.what();
    }
    // Without validation the broken module goes through unnoticed.
    auto q = small_program();
    o.validate = false;
    EXPECT_NO_THROW(run_passes(q, {break_ssa{}}, o));
}

TEST(pass_manager, a_module_broken_before_the_passes_is_not_blamed_on_them) {
    auto p = small_program();
    break_ssa{}.apply(*p.get_main_module());
    pass_options o;
    o.validate = true;
    try {
        run_passes(*p.get_main_module(), {do_nothing{}}, o);
        FAIL() << "no error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("before the passes"), std::string::npos) << e.what();
    }
}

TEST(pass_manager, trace_and_time) {
    auto p = small_program();
    pass_options o;
    o.trace = true;
    o.time = true;
    testing::internal::CaptureStderr();
    run_passes(p, {do_nothing{}, make_pass("dce")}, o);
    auto err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("[kiln] after do_nothing:\nmodule main\n"), std::string::npos) << err;
    EXPECT_NE(err.find("[kiln] after dead_code_elimination:"), std::string::npos) << err;
    EXPECT_NE(err.find("[kiln] pass do_nothing: "), std::string::npos) << err;
    EXPECT_NE(err.find("[kiln] passes total: "), std::string::npos) << err;
}

TEST(pass_manager, sub_modules_run_first) {
    program p;
    auto* body = p.create_module("body");
    body->add_return({body->add_parameter("y", s23())});
    std::vector<std::string> seen;
    struct record {
        std::vector<std::string>* seen;
        std::string name() const { return "record"; }
        void apply(module& m) const { seen->push_back(m.name()); }
    };
    // The main module uses no sub-module here, so both are simply visited, main last.
    auto& m = *p.get_main_module();
    m.add_return({m.add_parameter("x", s23())});
    run_passes(p, {record{&seen}}, pass_options{});
    ASSERT_EQ(seen.size(), 2u);
    EXPECT_EQ(seen.back(), "main");
}

TEST(pipeline, target_independent_order) {
    std::vector<std::string> names;
    for (auto& ps : target_independent_passes(compile_options{})) names.push_back(ps.name());
    EXPECT_EQ(names, (std::vector<std::string>{"dead_code_elimination", "loop_append", "fuse_qdq", "simplify_dynamic_ops", "propagate_constants",
                                               "dead_code_elimination", "common_subexpression_elimination",
                                               "simplify_algebra", "simplify_reshapes", "simplify_algebra",
                                               "common_subexpression_elimination", "dead_code_elimination"}));
    auto all = get_pass_names();
    for (auto n : {"schedule", "simplify_algebra", "simplify_reshapes", "memory_coloring", "dce", "cse"})
        EXPECT_NE(std::find(all.begin(), all.end(), n), all.end()) << n;
    EXPECT_THROW(make_pass("no_such_pass"), error);
}

TEST(pipeline, compile_runs_the_rewrites) {
    // relu(x * 1 / 4): the identity goes, the division becomes a multiplication, and
    // the compiled program (scheduled and planned) computes the same numbers exactly.
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", s23());
    auto one = m.add_literal(literal(s23(), std::vector<float>(6, 1.0f)));
    auto y = m.add_instruction(make_op("mul"), {x, one});
    y = m.add_instruction(make_op("div"), {y, m.add_literal(literal(4.0f))});
    m.add_return({m.add_instruction(make_op("relu"), {y})});
    auto in = passes_test::random_inputs(p);
    auto expected = p.eval(in);
    program c = p;
    run_passes(c, target_independent_passes(compile_options{}));
    module want;
    auto wx = want.add_parameter("x", s23());
    auto q = want.add_literal(literal(0.25f));
    want.add_return({want.add_instruction(make_op("relu"), {want.add_instruction(make_op("mul"), {wx, q})})});
    EXPECT_EQ(*c.get_main_module(), want) << *c.get_main_module();
    p.compile(*get_target("ref"));
    EXPECT_TRUE(p.eval(in)[0] == expected[0]);
}
