// schedule: orders lowered instructions for a smaller arena; never a larger one. The
// before/after cases written as text are in passes_schedule_text_test.cpp.
#include "passes/memory_coloring.hpp"
#include "passes/schedule.hpp"
#include "passes_test_util.hpp"
#include "targets/ref/lowering.hpp"

#include "ops/reduce.hpp"

#include <kiln/pipeline.hpp>

#include <random>

using namespace kiln;

namespace {

shape f32(std::vector<std::size_t> lens) { return shape(type::float32, std::move(lens)); }

std::size_t arena(const module& m) {
    auto b = buffer_intervals(m);
    return assign_offsets(b, 64);
}

op::reduce_sum sum_all() {
    op::reduce_sum r;
    r.axes = {0};
    return r;
}

// Two branches from x, each a large intermediate reduced to one value, joined at the end.
// `interleaved`: both large intermediates first (both live at once), else branch by branch.
program two_branches(bool interleaved) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({1024}));
    instruction_ref a1, b1, a2, b2;
    if (interleaved) {
        a1 = m.add_instruction(make_op("relu"), {x});
        b1 = m.add_instruction(make_op("exp"), {x});
        a2 = m.add_instruction(sum_all(), {a1});
        b2 = m.add_instruction(sum_all(), {b1});
    } else {
        a1 = m.add_instruction(make_op("relu"), {x});
        a2 = m.add_instruction(sum_all(), {a1});
        b1 = m.add_instruction(make_op("exp"), {x});
        b2 = m.add_instruction(sum_all(), {b1});
    }
    m.add_return({m.add_instruction(make_op("add"), {a2, b2})});
    return p;
}

}  // namespace

TEST(schedule, leaves_a_good_order_alone_and_unlowered_modules_untouched) {
    auto good = two_branches(false);
    auto& m = *good.get_main_module();
    std::string unlowered = m.to_string();
    schedule{}.apply(m);
    EXPECT_EQ(m.to_string(), unlowered);
    ref::lowering{}.apply(m);
    std::string lowered = m.to_string();
    schedule{}.apply(m);
    EXPECT_EQ(m.to_string(), lowered);
}

TEST(schedule, compiled_results_match_and_arena_shrinks) {
    auto p = two_branches(true);
    auto unplanned = p;
    p.compile(*get_target("ref"));
    compile_options no_plan;
    no_plan.memory_planning = false;
    unplanned.compile(*get_target("ref"), no_plan);
    auto in = passes_test::random_inputs(p);
    EXPECT_TRUE(p.eval(in)[0] == unplanned.eval(in)[0]);
    EXPECT_EQ(p.get_memory_usage().arena_bytes, 4096u + 2 * 64u);  // the final sum is returned, not planned
}

// Random DAGs of pointwise ops, reductions and broadcasts over sizes 1..1024: the
// scheduled arena is never larger, the module stays valid, and compiled results are
// bit-identical to an unplanned, unscheduled compile.
TEST(schedule, random_dags_never_grow_the_arena) {
    std::mt19937 gen(2024);
    const std::vector<std::size_t> sizes{16, 256, 1024};
    std::size_t shrunk = 0;
    for (int trial = 0; trial < 60; ++trial) {
        program p;
        auto& m = *p.get_main_module();
        std::vector<instruction_ref> values{m.add_parameter("x", f32({1024})), m.add_parameter("y", f32({256}))};
        const int n = 6 + static_cast<int>(gen() % 24);
        auto pick = [&](auto pred) {
            std::vector<instruction_ref> c;
            for (auto v : values)
                if (pred(v)) c.push_back(v);
            return c.empty() ? values.front() : c[gen() % c.size()];
        };
        for (int i = 0; i < n; ++i) {
            auto u = values[gen() % values.size()];
            const std::size_t len = u->get_shape().lens()[0];
            switch (gen() % 4) {
                case 0: values.push_back(m.add_instruction(make_op(gen() % 2 ? "relu" : "neg"), {u})); break;
                case 1: {
                    auto v = pick([&](instruction_ref w) { return w->get_shape().lens()[0] == len; });
                    values.push_back(m.add_instruction(make_op("add"), {u, v}));
                    break;
                }
                case 2: values.push_back(m.add_instruction(sum_all(), {u})); break;
                default: {
                    auto one = pick([](instruction_ref w) { return w->get_shape().lens()[0] == 1; });
                    if (one->get_shape().lens()[0] != 1) one = m.add_instruction(sum_all(), {u});
                    auto big = sizes[gen() % sizes.size()];
                    auto c = m.add_literal(passes_test::random_literal(f32({big}), static_cast<unsigned>(trial * 100 + i)));
                    values.push_back(m.add_instruction(make_op("mul"), {one, c}));
                }
            }
        }
        // Return every value nobody reads (so nothing is dead) that is not a parameter.
        std::vector<instruction_ref> outs;
        for (auto v : values)
            if (v->outputs().empty() && !v->is_param()) outs.push_back(v);
        if (outs.empty()) outs.push_back(values.back());
        m.add_return(outs);

        program lowered = p;
        auto& lm = *lowered.get_main_module();
        ref::lowering{}.apply(lm);
        const auto before = arena(lm);
        schedule{}.apply(lm);
        lm.validate();
        const auto after = arena(lm);
        EXPECT_LE(after, before) << lm;
        if (after < before) ++shrunk;

        program planned = p, unplanned = p;
        planned.compile(*get_target("ref"));
        compile_options no_plan;
        no_plan.memory_planning = false;
        unplanned.compile(*get_target("ref"), no_plan);
        auto in = passes_test::random_inputs(p, static_cast<unsigned>(trial));
        auto r0 = planned.eval(in), r1 = unplanned.eval(in);
        ASSERT_EQ(r0.size(), r1.size());
        for (std::size_t i = 0; i < r0.size(); ++i) EXPECT_TRUE(r0[i] == r1[i]) << "trial " << trial << " output " << i;
    }
    EXPECT_GT(shrunk, 0u);  // the scheduler does find better orders on some of them
}

// Ops with side effects keep their relative order even when another order would be
// smaller.
namespace {
struct test_effect {
    std::string name() const { return "test_effect"; }
    op_traits traits() const { return {.side_effects = true}; }
    shape compute_shape(const std::vector<shape>& in) const { return in.at(0); }
    argument compute(const shape&, const std::vector<argument>& args) const { return args[0].copy(); }
};
}  // namespace

TEST(schedule, side_effects_keep_their_order) {
    program p;
    auto& m = *p.get_main_module();
    auto x = m.add_parameter("x", f32({1024}));
    auto a1 = m.add_instruction(make_op("relu"), {x});
    auto e1 = m.add_instruction(test_effect{}, {x});
    auto b1 = m.add_instruction(make_op("exp"), {x});
    auto e2 = m.add_instruction(test_effect{}, {a1});
    auto a2 = m.add_instruction(sum_all(), {e2});
    auto b2 = m.add_instruction(sum_all(), {b1});
    m.add_return({m.add_instruction(make_op("add"), {a2, b2}), e1});
    ref::lowering{}.apply(m);
    schedule{}.apply(m);
    m.validate();
    // e1 (reading x) must still come before e2 (reading a1), though running e2 first
    // would free a1 earlier.
    std::vector<const instruction*> effects;
    for (auto& ins : m) {
        auto* kern = ins.get_operator().any_cast<ref::kernel>();
        if (kern && kern->op.name() == "test_effect") effects.push_back(&ins);
    }
    ASSERT_EQ(effects.size(), 2u);
    EXPECT_EQ(&*effects[0]->inputs()[0], &*x) << m;
}

TEST(schedule, is_in_the_pass_table) { EXPECT_EQ(make_pass("schedule").name(), "schedule"); }
