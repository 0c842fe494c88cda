// Control flow (If, Loop, Scan, SequenceMap) built directly in IR with the tiny test
// ops as bodies, run uncompiled and compiled for ref (sub-modules lowered and
// memory-planned), against results computed here.
#include "test_ops.hpp"

#include "ops/control_flow.hpp"
#include "ops/control_shapes.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/program.hpp>

#include <gtest/gtest.h>

#include <random>

using namespace kiln;

namespace {

std::vector<float> random_floats(std::size_t n, unsigned seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> d(0.25f, 2.0f);
    std::vector<float> v(n);
    for (auto& x : v) x = std::uniform_int_distribution<int>(0, 1)(gen) ? d(gen) : -d(gen);
    return v;
}

argument floats(const std::vector<std::size_t>& lens, const std::vector<float>& v) {
    return literal(shape(type::float32, lens), v).get_argument();
}
argument boolean(bool b) { return literal(shape(type::bool_), std::vector<bool>{b}).get_argument(); }
argument int64(std::int64_t v) { return literal(shape(type::int64), std::vector<std::int64_t>{v}).get_argument(); }

void expect_near(const std::vector<float>& a, const std::vector<float>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5f * (1 + std::fabs(b[i]))) << i;
}

// Runs `p` uncompiled and compiled for ref; both must give the same results.
std::vector<argument> run_both(const program& p, const param_map& in) {
    auto plain = p.eval(in);
    program c = p;
    c.compile(*get_target("ref"));
    auto compiled = c.eval(in);
    EXPECT_EQ(plain.size(), compiled.size());
    for (std::size_t i = 0; i < plain.size() && i < compiled.size(); ++i) EXPECT_EQ(plain[i], compiled[i]) << i;
    return compiled;
}

// main: if (c) then x + x else 3 * x, x read by both branches from main.
program make_if() {
    program p;
    auto* m = p.get_main_module();
    shape s(type::float32, {2, 3});
    auto c = m->add_parameter("c", shape(type::bool_));
    auto x = m->add_parameter("x", s);
    auto* t = p.create_module("then");
    auto tx = t->add_parameter("x", s);
    t->add_return({t->add_instruction(test::test_add{}, {tx, tx})});
    auto* e = p.create_module("else");
    auto ex = e->add_parameter("x", s);
    e->add_return({e->add_instruction(test::test_scale{3.0f}, {ex})});
    auto r = m->add_instruction(op::if_op{{"x"}, {"x"}}, {c, x, x}, {t, e});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {r})});
    return p;
}

}  // namespace

TEST(ops_control, if_runs_the_chosen_branch) {
    auto p = make_if();
    auto xv = random_floats(6, 1);
    for (bool c : {true, false}) {
        auto r = run_both(p, {{"c", boolean(c)}, {"x", floats({2, 3}, xv)}});
        std::vector<float> want;
        for (auto v : xv) want.push_back(c ? v + v : 3 * v);
        expect_near(r[0].to_vector<float>(), want);
        EXPECT_EQ(r[0].get_shape().lens(), (std::vector<std::size_t>{2, 3}));
    }
}

TEST(ops_control, if_rejects_a_non_bool_condition) {
    auto p = make_if();
    auto* m = p.get_main_module();
    auto x = m->get_parameter("x");
    auto mods = std::vector<module_ref>{p.get_module("then"), p.get_module("else")};
    try {
        m->add_instruction(op::if_op{{"x"}, {"x"}}, {x, x, x}, mods);
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.code(), error_code::type);
        EXPECT_NE(std::string(e.what()).find("condition"), std::string::npos) << e.what();
    }
}

TEST(ops_control, if_merges_branch_shapes) {
    program p;
    auto* t = p.create_module("t");
    t->add_return({t->add_literal(literal(shape(type::float32, {2}), std::vector<float>{1, 2}))});
    auto* e = p.create_module("e");
    e->add_return({e->add_literal(literal(shape(type::float32, {3}), std::vector<float>{1, 2, 3}))});
    auto* m = p.get_main_module();
    auto c = m->add_parameter("c", shape(type::bool_));
    auto r = m->add_instruction(op::if_op{}, {c}, {t, e});
    auto s = r->get_shape().sub_shapes().at(0);
    EXPECT_TRUE(s.dynamic());
    EXPECT_EQ(s.ndim(), 1u);
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {r})});
    auto out = run_both(p, {{"c", boolean(false)}});
    EXPECT_EQ(out[0].to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

namespace {
// Loop: acc += x for M iterations (x captured), scan output: acc after each step.
program make_loop(std::int64_t max_iterations = -1) {
    program p;
    shape s(type::float32, {3});
    auto* b = p.create_module("body");
    b->add_parameter("i", shape(type::int64));
    auto cond = b->add_parameter("cond", shape(type::bool_));
    auto acc = b->add_parameter("acc", s);
    auto bx = b->add_parameter("x", s);
    // The scaled copy is an intermediate: compiled, the body gets an arena of its own.
    auto same = b->add_instruction(test::test_scale{1.0f}, {acc});
    auto sum = b->add_instruction(test::test_add{}, {same, bx});
    b->add_return({cond, sum, sum});
    auto* m = p.get_main_module();
    auto trips = m->add_parameter("m", shape(type::int64));
    auto init = m->add_parameter("init", s);
    auto x = m->add_parameter("x", s);
    op::loop l;
    l.has_trip_count = true;
    l.num_carried = 1;
    l.body_inputs = {"i", "cond", "acc"};
    l.captured = {"x"};
    l.max_iterations = max_iterations;
    auto r = m->add_instruction(l, {trips, init, x}, {b});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {r}), m->add_instruction(builtin::get_tuple_elem{1}, {r})});
    return p;
}
}  // namespace

TEST(ops_control, loop_carries_and_stacks) {
    auto p = make_loop();
    auto init = random_floats(3, 2), x = random_floats(3, 3);
    for (std::int64_t trips : {0, 1, 4}) {
        auto r = run_both(p, {{"m", int64(trips)}, {"init", floats({3}, init)}, {"x", floats({3}, x)}});
        std::vector<float> acc = init, scans;
        for (std::int64_t i = 0; i < trips; ++i) {
            for (std::size_t j = 0; j < 3; ++j) acc[j] += x[j];
            scans.insert(scans.end(), acc.begin(), acc.end());
        }
        expect_near(r[0].to_vector<float>(), acc);
        EXPECT_EQ(r[1].get_shape().lens(), (std::vector<std::size_t>{std::size_t(trips), 3}));
        expect_near(r[1].to_vector<float>(), scans);
    }
}

TEST(ops_control, compiled_loop_body_is_planned) {
    auto p = make_loop();
    p.compile(*get_target("ref"));
    auto* body = p.get_module("body");
    EXPECT_NE(body->get_parameter(builtin::scratch_parameter), body->end()) << *body;
}

TEST(ops_control, loop_max_iterations_caps) {
    auto p = make_loop(2);
    auto init = random_floats(3, 4), x = random_floats(3, 5);
    auto r = run_both(p, {{"m", int64(7)}, {"init", floats({3}, init)}, {"x", floats({3}, x)}});
    EXPECT_EQ(r[1].get_shape().lens(), (std::vector<std::size_t>{2, 3}));
    std::vector<float> want;
    for (std::size_t j = 0; j < 3; ++j) want.push_back(init[j] + 2 * x[j]);
    expect_near(r[0].to_vector<float>(), want);
}

TEST(ops_control, loop_checks_its_inputs) {
    auto p = make_loop();
    auto* m = p.get_main_module();
    auto r = std::prev(m->get_return());
    while (r->name() != "loop") --r;
    op::loop bad = r->get_operator().get<op::loop>();
    bad.num_carried = 2;
    EXPECT_THROW(m->add_instruction(bad, r->inputs(), r->module_inputs()), error);
}

namespace {
// Scan (opset 9 form): state += slice of x along `axis`; scan output = state.
program make_scan(std::int64_t in_axis, std::int64_t in_dir, std::int64_t out_axis, std::int64_t out_dir) {
    program p;
    shape st(type::float32, {2});
    auto* b = p.create_module("body");
    auto s_in = b->add_parameter("s", st);
    auto x_in = b->add_parameter("xs", st);
    auto sum = b->add_instruction(test::test_add{}, {s_in, x_in});
    b->add_return({sum, sum});
    auto* m = p.get_main_module();
    auto init = m->add_parameter("init", st);
    auto x = m->add_parameter("x", in_axis == 0 ? shape(type::float32, {4, 2}) : shape(type::float32, {2, 4}));
    op::scan s;
    s.num_states = 1;
    s.num_scan_inputs = 1;
    s.input_axes = {in_axis};
    s.input_directions = {in_dir};
    s.output_axes = {out_axis};
    s.output_directions = {out_dir};
    s.body_inputs = {"s", "xs"};
    auto r = m->add_instruction(s, {init, x}, {b});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {r}), m->add_instruction(builtin::get_tuple_elem{1}, {r})});
    return p;
}
}  // namespace

TEST(ops_control, scan_axes_and_directions) {
    auto init = random_floats(2, 6), xv = random_floats(8, 7);
    for (std::int64_t in_axis : {0, 1})
        for (std::int64_t in_dir : {0, 1})
            for (std::int64_t out_axis : {0, -1})
                for (std::int64_t out_dir : {0, 1}) {
                    auto p = make_scan(in_axis, in_dir, out_axis, out_dir);
                    auto x = floats(in_axis == 0 ? std::vector<std::size_t>{4, 2} : std::vector<std::size_t>{2, 4}, xv);
                    auto r = run_both(p, {{"init", floats({2}, init)}, {"x", x}});
                    // Independent: walk the steps, collect states.
                    std::vector<float> state = init;
                    std::vector<std::vector<float>> outs;
                    for (std::size_t t = 0; t < 4; ++t) {
                        std::size_t k = in_dir ? 3 - t : t;
                        for (std::size_t j = 0; j < 2; ++j) state[j] += in_axis == 0 ? xv[k * 2 + j] : xv[j * 4 + k];
                        outs.push_back(state);
                    }
                    if (out_dir) std::reverse(outs.begin(), outs.end());
                    std::vector<float> want(8);
                    for (std::size_t t = 0; t < 4; ++t)
                        for (std::size_t j = 0; j < 2; ++j) (out_axis == 0 ? want[t * 2 + j] : want[j * 4 + t]) = outs[t][j];
                    expect_near(r[0].to_vector<float>(), state);
                    EXPECT_EQ(r[1].get_shape().lens(), out_axis == 0 ? (std::vector<std::size_t>{4, 2})
                                                                      : (std::vector<std::size_t>{2, 4}));
                    expect_near(r[1].to_vector<float>(), want);
                }
}

TEST(ops_control, scan_batched_with_sequence_lens) {
    // Opset-8 form: batch 2, time 3, features 2; batch 1 scans 2 steps only.
    program p;
    shape st(type::float32, {2});
    auto* b = p.create_module("body");
    auto s_in = b->add_parameter("s", st);
    auto x_in = b->add_parameter("xs", st);
    auto sum = b->add_instruction(test::test_add{}, {s_in, x_in});
    b->add_return({sum, sum});
    auto* m = p.get_main_module();
    auto lens = m->add_parameter("lens", shape(type::int32, {2}));
    auto init = m->add_parameter("init", shape(type::float32, {2, 2}));
    auto x = m->add_parameter("x", shape(type::float32, {2, 3, 2}));
    op::scan s;
    s.batched = true;
    s.has_sequence_lens = true;
    s.num_states = 1;
    s.num_scan_inputs = 1;
    s.body_inputs = {"s", "xs"};
    auto r = m->add_instruction(s, {lens, init, x}, {b});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {r}), m->add_instruction(builtin::get_tuple_elem{1}, {r})});
    auto iv = random_floats(4, 8), xv = random_floats(12, 9);
    auto out = run_both(p, {{"lens", literal(shape(type::int32, {2}), std::vector<int>{3, 2}).get_argument()},
                            {"init", floats({2, 2}, iv)},
                            {"x", floats({2, 3, 2}, xv)}});
    std::vector<float> fin(4), scans(12, 0.0f);
    for (std::size_t bb = 0; bb < 2; ++bb) {
        std::vector<float> st2{iv[bb * 2], iv[bb * 2 + 1]};
        for (std::size_t t = 0; t < (bb == 0 ? 3u : 2u); ++t)
            for (std::size_t j = 0; j < 2; ++j) {
                st2[j] += xv[(bb * 3 + t) * 2 + j];
                scans[(bb * 3 + t) * 2 + j] = st2[j];
            }
        fin[bb * 2] = st2[0];
        fin[bb * 2 + 1] = st2[1];
    }
    expect_near(out[0].to_vector<float>(), fin);
    expect_near(out[1].to_vector<float>(), scans);
}

TEST(ops_control, sequence_map_applies_the_body_per_item) {
    program p;
    auto* b = p.create_module("body");
    auto item = b->add_parameter("item", shape::make_dynamic(type::float32, {{0, dynamic_dimension::unbounded, {}}}));
    b->add_return({b->add_instruction(test::test_scale{-2.0f}, {item})});
    auto* m = p.get_main_module();
    auto seq = m->add_parameter("seq", shape::sequence(shape::make_dynamic(type::float32, {{0, 9, {}}})));
    auto r = m->add_instruction(op::sequence_map{1, {"item"}, {}}, {seq}, {b});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {r})});
    auto a = random_floats(3, 10), c = random_floats(5, 11);
    auto in = argument::make_sequence(shape(type::float32, {3}), {floats({3}, a), floats({5}, c)});
    auto out = run_both(p, {{"seq", in}});
    ASSERT_EQ(out[0].elements().size(), 2u);
    std::vector<float> wa, wc;
    for (auto v : a) wa.push_back(-2 * v);
    for (auto v : c) wc.push_back(-2 * v);
    expect_near(out[0].elements()[0].to_vector<float>(), wa);
    expect_near(out[0].elements()[1].to_vector<float>(), wc);
}

TEST(ops_control, merge_shapes) {
    shape a(type::float32, {2, 3}), b(type::float32, {2, 5});
    auto m = op::merge_shapes(a, b, "test");
    ASSERT_TRUE(m.dynamic());
    EXPECT_EQ(m.dyn_dims()[0], (dynamic_dimension{2, 2, {}}));
    EXPECT_FALSE(m.dyn_dims()[1].is_fixed());
    EXPECT_EQ(op::merge_shapes(a, a, "test"), a);
    // The unknown element gives way to what is known.
    auto u = op::unknown_element(type::float32);
    EXPECT_TRUE(op::is_unknown_element(u));
    EXPECT_EQ(op::merge_shapes(shape::sequence(u), shape::sequence(a), "test"), shape::sequence(a));
    // Ranks that disagree: unknown, and it stays unknown whatever joins it later (an If
    // whose then branch is an empty constant and whose else branch may give another rank
    // must not take the constant's shape: torchvision's Faster R-CNN did, and sliced its
    // detections to none).
    auto conflict = op::merge_shapes(a, shape(type::float32, {4}), "test");
    EXPECT_TRUE(op::is_unknown_element(conflict));
    EXPECT_TRUE(op::is_unknown_element(op::merge_shapes(shape(type::float32, {0}), conflict, "test")));
    EXPECT_TRUE(op::is_unknown_element(op::merge_shapes(conflict, a, "test")));
    EXPECT_TRUE(op::is_unknown_element(op::merge_shapes(u, conflict, "test")));
    EXPECT_TRUE(op::fits_shape(conflict, a));
    // An optional and its content stay optional.
    EXPECT_TRUE(op::merge_shapes(shape::optional(shape::sequence(a)), shape::sequence(a), "test").is_optional());
    EXPECT_THROW(op::merge_shapes(a, shape(type::int32, {2, 3}), "test"), error);
}
