// loop_append: a Loop body that grows a carried value with Concat along axis 0 returns only
// the new rows, and the loop concatenates them once; the results are those of the body as
// written (the uncompiled program runs it so).
#include "passes/loop_append.hpp"

#include "ops/control_flow.hpp"

#include <kiln/builtin_ops.hpp>
#include <kiln/program.hpp>
#include <kiln/register_op.hpp>

#include <gtest/gtest.h>

using namespace kiln;

namespace {

enum class variant { appends, reads_the_value, other_axis, concat_also_scanned };

// Loop over `m` steps: acc = concat(acc, cnt) along `axis`, cnt += x; acc starts [k, 2].
program make_append_loop(variant v) {
    program p;
    const auto any = dynamic_dimension{0, dynamic_dimension::unbounded, {}};
    const shape rows(type::float32, {1, 2});
    const shape acc_shape = v == variant::other_axis ? shape::make_dynamic(type::float32, {{1, 1, {}}, any})
                                                     : shape::make_dynamic(type::float32, {any, {2, 2, {}}});
    auto* b = p.create_module("body");
    b->add_parameter("i", shape(type::int64));
    auto cond = b->add_parameter("cond", shape(type::bool_));
    auto acc = b->add_parameter("acc", acc_shape);
    auto cnt = b->add_parameter("cnt", rows);
    auto x = b->add_parameter("x", rows);
    const std::int64_t axis = v == variant::other_axis ? 1 : 0;
    auto grown = b->add_instruction(make_op("concat", {{"axis", axis}}), {acc, cnt});
    auto next = b->add_instruction(make_op("add"), {cnt, x});
    std::vector<instruction_ref> outs{cond, grown, next};
    if (v == variant::reads_the_value) outs.push_back(b->add_instruction(make_op("shape_of"), {acc}));
    if (v == variant::concat_also_scanned) outs.push_back(grown);
    b->add_return(outs);
    auto* m = p.get_main_module();
    auto trips = m->add_parameter("m", shape(type::int64));
    auto init = m->add_parameter("init", v == variant::other_axis ? shape(type::float32, {1, 2}) : shape(type::float32, {3, 2}));
    auto c0 = m->add_parameter("c0", rows);
    auto xin = m->add_parameter("x", rows);
    op::loop l;
    l.has_trip_count = true;
    l.num_carried = 2;
    l.body_inputs = {"i", "cond", "acc", "cnt"};
    l.captured = {"x"};
    auto r = m->add_instruction(l, {trips, init, c0, xin}, {b});
    m->add_return({m->add_instruction(builtin::get_tuple_elem{0}, {r}), m->add_instruction(builtin::get_tuple_elem{1}, {r})});
    return p;
}

argument floats(std::vector<std::size_t> lens, std::vector<float> v) {
    return literal(shape(type::float32, std::move(lens)), v).get_argument();
}

// The appended carried values of main's loop after the pass.
std::vector<std::size_t> appended_after_pass(program p) {
    loop_append{}.apply(*p.get_main_module());
    for (auto& ins : *p.get_main_module())
        if (const auto* l = ins.get_operator().any_cast<op::loop>()) return l->appended;
    return {};
}

}  // namespace

TEST(loop_append, the_body_returns_the_rows_and_the_loop_concatenates_them) {
    auto p = make_append_loop(variant::appends);
    EXPECT_EQ(appended_after_pass(p), (std::vector<std::size_t>{0}));
    program compiled = p;
    compiled.compile(*get_target("ref"));
    for (std::int64_t trips : {0, 1, 5}) {
        param_map in{{"m", literal(shape(type::int64), std::vector<std::int64_t>{trips}).get_argument()},
                     {"init", floats({3, 2}, {0.5f, -1, 2, 3.5f, -4, 6})},
                     {"c0", floats({1, 2}, {1.25f, -2})},
                     {"x", floats({1, 2}, {0.75f, 3})}};
        auto want = p.eval(in);  // the body as written, no passes
        auto got = compiled.eval(in);
        ASSERT_EQ(got.size(), 2u);
        EXPECT_EQ(got[0].get_shape().lens(), (std::vector<std::size_t>{3 + static_cast<std::size_t>(trips), 2}));
        EXPECT_EQ(got[0], want[0]) << "trips " << trips;
        EXPECT_EQ(got[1], want[1]) << "trips " << trips;
    }
}

TEST(loop_append, bodies_that_see_the_value_or_concatenate_elsewhere_are_left_alone) {
    // The body reads the growing value (its shape), appends along axis 1, or returns the
    // Concat as a scan output too.
    for (auto v : {variant::reads_the_value, variant::other_axis, variant::concat_also_scanned})
        EXPECT_TRUE(appended_after_pass(make_append_loop(v)).empty()) << static_cast<int>(v);
}
