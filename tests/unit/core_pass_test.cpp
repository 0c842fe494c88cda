// Unit tests of kiln::pass (the type-erased pass) and the parts of the pass manager
// not covered by passes_pipeline_test.cpp: errors raised inside a pass, run_passes on
// one module, the pass registry.
#include "test_ops.hpp"

#include <kiln/pass.hpp>
#include <kiln/pipeline.hpp>
#include <kiln/program.hpp>

#include <gtest/gtest.h>

#include <algorithm>

using namespace kiln;

namespace {

const shape s23(type::float32, {2, 3});

// Changes every test_scale factor to `to`; counts the modules it saw.
struct rescale {
    float to = 1.0f;
    int* calls = nullptr;
    std::string name() const { return "core_test_rescale"; }
    void apply(module& m) const {
        if (calls) ++*calls;
        for (auto it = m.begin(); it != m.end(); ++it)
            if (it->name() == "test_scale") m.replace_instruction(it, test::test_scale{to}, it->inputs());
    }
};

struct failing {
    std::string name() const { return "core_test_failing"; }
    void apply(module&) const { throw_error(error_code::unsupported, "cannot do this"); }
};

void build(module& m) {
    auto x = m.add_parameter("x", s23);
    m.add_return({m.add_instruction(test::test_scale{2.0f}, {x})});
}

}  // namespace

TEST(core_pass, wraps_a_pass_struct) {
    int calls = 0;
    pass p = rescale{5.0f, &calls};
    EXPECT_EQ(p.name(), "core_test_rescale");
    module m;
    build(m);
    p.apply(m);
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(std::prev(m.get_return())->get_operator(), operation(test::test_scale{5.0f}));
    pass copy = p;  // copies share nothing mutable but behave the same
    copy.apply(m);
    EXPECT_EQ(calls, 2);
}

TEST(core_pass, run_passes_on_one_module_in_order) {
    module m;
    build(m);
    int calls = 0;
    pass_options o;
    o.validate = true;
    run_passes(m, {rescale{3.0f, &calls}, rescale{4.0f, &calls}}, o);
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(std::prev(m.get_return())->get_operator(), operation(test::test_scale{4.0f}));
}

TEST(core_pass, run_passes_visits_every_module_of_a_program) {
    program p;
    build(*p.get_main_module());
    build(*p.create_module("other"));
    int calls = 0;
    run_passes(p, {rescale{7.0f, &calls}}, pass_options{});
    EXPECT_EQ(calls, 2);
    for (auto* m : p.get_modules())
        EXPECT_EQ(std::prev(m->get_return())->get_operator(), operation(test::test_scale{7.0f})) << m->name();
}

TEST(core_pass, errors_inside_a_pass_name_the_pass_and_module) {
    module m("body");
    build(m);
    try {
        run_passes(m, {failing{}}, pass_options{});
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::unsupported);  // the code is kept
        EXPECT_NE(e.message().find("core_test_failing"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("body"), std::string::npos) << e.what();
        EXPECT_NE(e.message().find("cannot do this"), std::string::npos) << e.what();
    }
}

TEST(core_pass, registry_by_name) {
    auto names = get_pass_names();
    EXPECT_FALSE(names.empty());
    for (auto& n : names) EXPECT_EQ(make_pass(n).name().empty(), false) << n;
    EXPECT_NE(std::find(names.begin(), names.end(), "memory_coloring"), names.end());
    try {
        (void)make_pass("core_test_no_such_pass");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::invalid_argument);
        EXPECT_NE(e.message().find("'core_test_no_such_pass'"), std::string::npos);
    }
    EXPECT_FALSE(target_independent_passes({}).empty());
}
