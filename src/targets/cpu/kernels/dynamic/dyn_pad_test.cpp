// cpu::dyn_pad (a generic program's Pad) against the reference kernel: pads read when it
// runs (Swin's, from the shape) and fixed ones, on a row-major and a channels-last input,
// with a fill value and axes; pads of zero (the input itself); a mode it leaves to the
// reference op.
#include "cpu_test_util.hpp"
#include "ops_run.hpp"

#include "ops/nn_conv.hpp"

#include <kiln/program.hpp>

using namespace kiln;
using namespace kiln::cpu_test;
using kiln::test::compile_generic_pair;
using kiln::test::ops_run;

namespace {

const dynamic_dimension batch{1, 3, {}, "batch"}, height{2, 30, {}, "h"}, width{2, 30, {}, "w"};
dynamic_dimension fixed(std::size_t v) { return {v, v, {}, {}}; }

// x [batch, 4, h, w] (through a convolution when `after_conv`: channels-last), padded by
// run-time pads over axes 2 and 3 with the value 0.5 (pad_dynamic), or by fixed pads (pad).
program pad_program(bool after_conv, bool run_time, const std::string& mode = "constant") {
    program p;
    auto* m = p.get_main_module();
    auto x = m->add_parameter("x", shape::make_dynamic(type::float32, {batch, fixed(4), height, width}));
    if (after_conv) {
        op::convolution conv;
        conv.padding = {1, 1, 1, 1};
        x = m->add_instruction(conv, {x, m->add_literal(random_literal({6, 4, 3, 3}, 0.3f))});
    }
    instruction_ref y;
    if (run_time) {
        auto pads = m->add_parameter("pads", shape::make_dynamic(type::int64, {fixed(4)}));
        auto fill = m->add_literal(literal(shape(type::float32, {1}), std::vector<float>{0.5f}));
        auto axes = m->add_literal(literal(shape(type::int64, {2}), std::vector<std::int64_t>{2, 3}));
        y = m->add_instruction(make_op("pad_dynamic", {{"mode", value(mode)}, {"has_value", value(true)}, {"has_axes", value(true)}}),
                               {x, pads, fill, axes});
    } else {
        y = m->add_instruction(make_op("pad", {{"mode", value(mode)}, {"pads", {0, 1, 2, 0, 1, 0, 3, 1}}}), {x});
    }
    m->add_return({m->add_instruction(make_op("relu"), {y})});
    return p;
}

void expect_matches_ref(program p, bool run_time, const std::string& expect_op) {
    program r = p;
    ASSERT_TRUE(compile_generic_pair(p, r));
    for (auto [n, h, w, pads] : std::vector<std::tuple<std::size_t, std::size_t, std::size_t, std::vector<std::int64_t>>>{
             {1, 7, 9, {0, 3, 1, 2}}, {2, 14, 5, {0, 0, 0, 0}}, {3, 30, 30, {2, 0, 0, 5}}, {1, 2, 2, {1, 1, 1, 1}}}) {
        SCOPED_TRACE("x [" + std::to_string(n) + ", 4, " + std::to_string(h) + ", " + std::to_string(w) + "]");
        param_map in{{"x", random_literal({n, 4, h, w}).get_argument()}};
        if (run_time) in.emplace("pads", literal(shape(type::int64, {4}), pads).get_argument());
        auto got = p.eval(in);
        auto want = r.eval(in);
        ASSERT_EQ(got.size(), 1u);
        EXPECT_EQ(got[0].get_shape().lens(), want[0].get_shape().lens());
        expect_close(got[0], want[0]);
        EXPECT_EQ(ops_run(p, in)[expect_op], 1u);
    }
}

}  // namespace

TEST(cpu_dyn_pad, run_time_and_fixed_pads_match_ref_in_either_order) {
    for (bool after_conv : {false, true})
        for (bool run_time : {true, false}) {
            SCOPED_TRACE(std::string(after_conv ? "channels-last" : "row-major") + (run_time ? ", run-time pads" : ", fixed pads"));
            expect_matches_ref(pad_program(after_conv, run_time), run_time,
                               run_time ? "cpu::dyn_pad(pad_dynamic)" : "cpu::dyn_pad(pad)");
        }
}

TEST(cpu_dyn_pad, other_modes_run_the_reference_op_inside) {
    expect_matches_ref(pad_program(true, true, "reflect"), true, "cpu::dyn_pad(pad_dynamic)");
    expect_matches_ref(pad_program(false, false, "edge"), false, "cpu::dyn_pad(pad)");
}
